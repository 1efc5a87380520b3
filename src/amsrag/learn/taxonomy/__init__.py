"""Training the task head of the five-way taxonomy."""
