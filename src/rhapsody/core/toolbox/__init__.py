"""The toolbox: the tool protocol, the toolbox that runs calls, permissions, approval, hooks and confinement."""
