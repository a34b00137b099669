"""The core by role: agent, toolbox, accounting, session, access (layered in that order). Imports only the stdlib, pydantic and rhapsody.core."""
