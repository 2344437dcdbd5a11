"""keras_gelu's public names, which `keras_gelu/__init__.py` hands on.

Importing this module imports Keras and registers every keras_gelu object
that a `.keras` file may name.
"""

from keras_gelu import stacking
from keras_gelu.activations import ACTIVATIONS
from keras_gelu.activations import bilinear
from keras_gelu.activations import elu
from keras_gelu.activations import geglu
from keras_gelu.activations import geglu_tanh
from keras_gelu.activations import gelu
from keras_gelu.activations import gelu_sigmoid
from keras_gelu.activations import gelu_tanh
from keras_gelu.activations import get
from keras_gelu.activations import glu
from keras_gelu.activations import leaky_relu
from keras_gelu.activations import linear
from keras_gelu.activations import mish
from keras_gelu.activations import names
from keras_gelu.activations import quick_gelu
from keras_gelu.activations import reglu
from keras_gelu.activations import relu
from keras_gelu.activations import sigmoid
from keras_gelu.activations import silu
from keras_gelu.activations import swiglu
from keras_gelu.activations import swish
from keras_gelu.activations.fusion import xla_fusion
from keras_gelu.blocks import FeedForward
from keras_gelu.blocks import matched_hidden_dim
from keras_gelu.blocks import projection_layers
from keras_gelu.layers import GEGLU
from keras_gelu.layers import GELU
from keras_gelu.layers import GLU
from keras_gelu.layers import Bilinear
from keras_gelu.layers import LearnableLeakyReLU
from keras_gelu.layers import ReGLU
from keras_gelu.layers import SwiGLU

__all__ = [
    "ACTIVATIONS",
    "Bilinear",
    "FeedForward",
    "GEGLU",
    "GELU",
    "GLU",
    "LearnableLeakyReLU",
    "ReGLU",
    "SwiGLU",
    "bilinear",
    "elu",
    "geglu",
    "geglu_tanh",
    "gelu",
    "gelu_sigmoid",
    "gelu_tanh",
    "get",
    "glu",
    "leaky_relu",
    "linear",
    "matched_hidden_dim",
    "mish",
    "names",
    "projection_layers",
    "quick_gelu",
    "reglu",
    "relu",
    "sigmoid",
    "silu",
    "stacking",
    "swiglu",
    "swish",
    "xla_fusion",
]
