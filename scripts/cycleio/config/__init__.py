"""Configuration: the schema-driven study config (settings), the cycle calendar, the config docs."""
