"""`python -m kg_service.cli`: kg-train."""

from kg_service.cli.train import main

if __name__ == "__main__":
    main()
