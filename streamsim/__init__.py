"""streamsim: a deterministic simulator of GPU stream and communication ordering."""
