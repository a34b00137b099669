"""The agent loop: run, turn, round, the request, the tool calls a round makes, the turn's end and its safety net."""
