"""tuner/cli."""
