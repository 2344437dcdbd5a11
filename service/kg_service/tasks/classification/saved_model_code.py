"""The pyfunc model of a bare SavedModel folder ("models from code"):
`kg serve exports/NAME/VERSION` saves it beside the folder, as an
artifact (`kg_service.serving.model_folder`), and MLflow runs it at load
time in kg serve's own process, where kg_service is installed.
"""

import mlflow

from kg_service.tasks.classification.pyfunc import SavedModelModel

mlflow.models.set_model(SavedModelModel())
