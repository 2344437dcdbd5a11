"""kg: one command for the whole workflow, a thin shell over the service.

    kg train   the sweep (the same command object as kg-train)
    kg report  a sweep's report, rebuilt from the tracking store
    kg serve   MLflow's scoring server on a registered model or a SavedModel
    kg predict predictions for a file, without a server
    kg models  what the registry holds
    kg plan    the seeds that would decide each comparison of a stored sweep

This module only registers the subcommands; each lives in its own module
(`cli/train.py`, `cli/report.py`, `cli/serve.py`) and imports TensorFlow
and MLflow only once its arguments are valid. Exit codes: those of
`kg_service.cli.options` (0 done; 2 a usage error or a `ServiceError`,
one line on stderr, no traceback; 130 interrupted); `kg train` as kg-train.

Another command joins the group with one line: `main.add_command(command)`.
"""

import click

from kg_service.cli import options
from kg_service.cli.report import report as report_command
from kg_service.cli.results import results as results_command
from kg_service.cli.seeds import plan as plan_command
from kg_service.cli.serve import models
from kg_service.cli.serve import predict
from kg_service.cli.serve import serve
from kg_service.cli.train import main as train_command


@click.group(context_settings=options.CONTEXT)
def main():
    """Train, compare, serve and query keras-gelu models tracked in MLflow.

    \b
    The workflow, runnable from a clone on a CPU (a minute at most each):
      kg train --config configs/tiny.yaml            # sweep, register tiny-relu/-gelu
      kg models                                      # versions, aliases, metrics
      printf 'x,y\\n0.5,-0.2\\n' | kg predict models:/tiny-gelu@champion --input -
      kg serve models:/tiny-gelu@champion            # http://127.0.0.1:5001
      curl -X POST 127.0.0.1:5001/invocations -H 'Content-Type: application/json' \\
           -d '{"inputs": [[0.5, -0.2]]}'

    Every command reads the same tracking store: --tracking-uri, else
    MLFLOW_TRACKING_URI, else ./mlflow.db. `kg COMMAND --help` for each.
    """


main.add_command(train_command, name="train")
main.add_command(report_command, name="report")
main.add_command(serve, name="serve")
main.add_command(predict, name="predict")
main.add_command(models, name="models")
main.add_command(plan_command, name="plan")
main.add_command(results_command, name="results")


if __name__ == "__main__":
    main(prog_name="kg")
