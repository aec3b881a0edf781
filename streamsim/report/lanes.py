"""How agents appear as lanes: one name and one order for every picture and the Perfetto trace."""
from __future__ import annotations

from ..trace import HOST, Agent


def agent_label(agent: Agent) -> str:
    """A lane's label: ``rank0 / compute`` for a stream, ``rank0 / main (host)`` for a host thread."""
    return f"rank{agent.rank} / {agent.name}" + (" (host)" if agent.kind == HOST else "")


def lane_key(agent: Agent) -> tuple:
    """Lane order: by rank, then host threads, compute streams, comm streams, then by name."""
    return (agent.rank, 0 if agent.kind == HOST else 2 if agent.is_comm else 1, agent.name)
