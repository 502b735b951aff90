"""search_space/recorded."""
