"""The sweep configuration: schema, loading (YAML, --set) and the catalog of named choices."""
