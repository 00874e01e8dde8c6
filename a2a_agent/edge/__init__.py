"""The A2A edge: protobuf types, errors and transports live here and nowhere else."""
