"""`kg serve`, `kg predict`, `kg models`: the registry's models, served and queried.

Thin shells over `kg_service.serving.server` and the tracking store: each
imports TensorFlow and MLflow only once its arguments are valid.
"""

import dataclasses
import json
import os
import sys

import click

from kg_service.cli import options
from kg_service.config import derived as config
from kg_service.errors import ServiceError

DEFAULT_PORT = 5001  # see `serve`'s help: 5000 is the tracking server's

TRACKING_URI = options.tracking_uri(
    "MLflow tracking URI (and registry) for models:/ and runs:/ URIs; wins "
    "over MLFLOW_TRACKING_URI. Default: MLflow's, sqlite:///mlflow.db in the "
    "current folder."
)


@click.command(context_settings=options.CONTEXT)
@click.argument("model_uri", metavar="MODEL")
@TRACKING_URI
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind. 0.0.0.0 serves every interface (a container, a "
    "team server): only with --token-file, or behind a firewall or proxy.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="TCP port; 0 picks a free one (printed). Not MLflow's 5000: that is "
    "the tracking server's port, which often runs on the same host.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Server processes, each with its own copy of the model. One serves "
    "best on 2 cores (docs/benchmarks.md); more only with more cores.",
)
@click.option(
    "--max-request-mb",
    type=options.FiniteRange(min=0, min_open=True),
    default=8.0,
    show_default=True,
    help="Largest request body (8 MB: about 350,000 rows of 2 features, 12,000 "
    "of 64); a bigger one is answered 413, dropped unparsed.",
)
@click.option(
    "--timeout",
    type=click.IntRange(1),
    default=60,
    show_default=True,
    help="Seconds one request may take before it is answered 504.",
)
@click.option(
    "--client-timeout",
    type=options.FiniteRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds a client may take to send a request's headers, or the next "
    "part of its body, before it is answered 408 and disconnected.",
)
@click.option(
    "--token-file",
    metavar="PATH",
    envvar="KG_SERVE_TOKEN_FILE",
    help="Require `Authorization: Bearer <token>` on every route but /ping and "
    "/health (else 401); the token is the file's first line. Env: "
    "KG_SERVE_TOKEN_FILE.",
)
@click.option(
    "--expose-docs",
    is_flag=True,
    help="Serve FastAPI's /docs, /redoc, /openapi.json and MLflow's /version "
    "(404 without it).",
)
def serve(
    model_uri, tracking_uri, host, port, workers, max_request_mb, timeout,
    client_timeout, token_file, expose_docs,
):  # fmt: skip
    """Serve MODEL over HTTP with MLflow's scoring server until Ctrl-C.

    MODEL is models:/NAME@ALIAS, models:/NAME/VERSION, runs:/RUN_ID/model, a
    local MLflow model folder, or a SavedModel folder (exports/NAME/VERSION).
    The model loads in this environment (MLflow's --env-manager local); the
    URL is printed once /ping answers. Requests go to POST /invocations,
    as JSON ({"inputs": ...}, {"instances": ...}, {"dataframe_split": ...})
    or CSV; bad input is a 4xx naming the problem.

    \b
    Examples:
      kg serve models:/tiny-gelu@champion
      kg serve models:/moons-relu@champion --port 8080 --tracking-uri http://mlflow:5000
      kg serve exports/tiny-gelu/1 --port 0
      kg serve models:/moons-gelu/3 --host 0.0.0.0 --workers 2 --token-file token.txt

    Ctrl-C or SIGTERM stops the server and its workers.
    """
    # MLflow, TensorFlow: only once the arguments are valid (kg --help stays fast).
    from kg_service.serving import server as serving

    if token_file is None and not serving.is_loopback(host):
        click.echo(
            f"kg serve: warning: --host {host} serves beyond this machine with no "
            f"--token-file: anyone who reaches it can query the model. Give a "
            f"token file, or serve behind a firewall or an authenticating proxy.",
            err=True,
        )
    try:
        server = serving.start(
            model_uri,
            tracking_uri=tracking_uri,
            host=host,
            port=port,
            workers=workers,
            max_request_bytes=int(max_request_mb * 1e6),
            timeout=timeout,
            client_timeout=client_timeout,
            token_file=token_file,
            expose_docs=expose_docs,
        )
    except ServiceError as error:
        options.fail("kg serve", error)
    code = server.wait(echo=options.echo)
    sys.exit(code)


@click.command(context_settings=options.CONTEXT)
@click.argument("model_uri", metavar="MODEL")
@click.option(
    "--input",
    "input_path",
    required=True,
    metavar="FILE|-",
    help="Rows to predict: .csv (a header of the feature names, or none), .json (the server's formats: "
    '{"inputs": ...}, {"instances": ...}, {"dataframe_split": ...}) or .npy '
    "(float [n, features]); - reads CSV or JSON from stdin.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["csv", "json"]),
    default="csv",
    show_default=True,
    help='csv: a header of class names, one row per input; json: the server\'s '
    '{"predictions": [[...], ...]}.',
)
@click.option(
    "--max-input-mb",
    type=options.FiniteRange(min=0, min_open=True),
    default=64.0,
    show_default=True,
    help="Largest input read (a file, or stdin); a bigger one is refused "
    "unread, as kg serve refuses a request over --max-request-mb.",
)
@TRACKING_URI
def predict(model_uri, input_path, output_format, max_input_mb, tracking_uri):
    """Print MODEL's predictions for the rows in a file, without a server.

    MODEL as for `kg serve`. The answers are those of the served model:
    the same loader, the same input checks.

    \b
    Examples:
      printf 'x,y\\n0.5,-0.2\\n' | kg predict models:/tiny-gelu@champion --input -
      kg predict models:/tiny-gelu@champion --input request.json --format json
      echo '{"inputs": [[0.5, -0.2]]}' | kg predict models:/tiny-gelu/1 --input -
      kg predict exports/tiny-gelu/1 --input x.npy
    """
    # MLflow, TensorFlow: only once the arguments are valid (kg --help stays fast).
    from kg_service.serving import predict as serving

    # TensorFlow's C++ start-up lines would bury a script's stderr; kept in
    # a file, printed only if kg predict fails (as kg-train does).
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        with options.native_stderr_to_file(enabled=True):
            output = serving.predict(
                model_uri, input_path, tracking_uri=tracking_uri,
                max_bytes=int(max_input_mb * 1e6),
            )  # fmt: skip
        options.echo(serving.format_predictions(output, output_format), nl=False)
    except ServiceError as error:
        options.fail("kg predict", error)


@click.command(context_settings=options.CONTEXT)
@click.argument("names", nargs=-1, metavar="[NAME]...")
@TRACKING_URI
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
)
def models(names, tracking_uri, output_format):
    """List registered models: each version's aliases, activation, seed,
    metrics and SavedModel, newest first.

    NAME limits the list to those models.

    \b
    Examples:
      kg models
      kg models tiny-gelu --tracking-uri sqlite:///mlflow.db
      kg models --format json | jq '.[0].aliases'
    """
    # MLflow and scipy (wording's statistics): seconds, only for a real query.
    from kg_service.analysis.words import tables
    from kg_service.tracking import registry  # MLflow: only for a real query

    try:
        uri = config.tracking_uri_for(tracking_uri)
        found = registry.registered_versions(uri, names)
    except ServiceError as error:
        options.fail("kg models", error)
    if output_format == "json":
        options.echo(json.dumps([dataclasses.asdict(v) for v in found], indent=2))
    else:
        options.echo(tables.versions_table(found))

