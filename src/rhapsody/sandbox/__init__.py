"""The OS sandbox and the processes rhapsody starts: bubblewrap, seccomp, the lifeline, bounded child processes."""
