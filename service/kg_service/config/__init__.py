"""The sweep configuration: schema, loading (YAML, --set) and the catalog of named choices.

Modules:
    catalog: the named choices, listed once, importing nothing heavy.
    claims: `claims:`, what a sweep claims, declared before the run.
    derived: what follows from a validated config alone (grid, sizes, names).
    excerpts: values as the user wrote them, cut short, for every message.
    fields: the schema's building blocks: strict value types and checks.
    loading: the file, its `--set` overrides, validation.
    problems: pydantic's errors, as the user wrote the values.
    schema: the typed config objects, validated once at the edge.
    tuning: the `tuning:` block: each activation's own value of one setting.
    yaml_file: YAML with each key's line, duplicate keys caught.
"""
