"""The directory streamsim record puts first on PYTHONPATH: its sitecustomize is the start-up hook."""
