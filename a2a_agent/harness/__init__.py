"""The harness: runs commands in a task's git workspace and keeps its files honest."""
