"""The command line: kg and kg-train, a thin shell over the service."""
