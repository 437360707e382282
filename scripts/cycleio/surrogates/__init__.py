"""The surrogates of the cycled system: grid, synthetic fields, file kinds and their writers, the
inventory of each step's files, and the job runner that stages, runs and verifies a step."""
