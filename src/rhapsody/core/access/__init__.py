"""Access: permission modes and rules, protected reads and credential locations, addresses, confined reads."""
