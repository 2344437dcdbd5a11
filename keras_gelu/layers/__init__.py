"""keras_gelu's layers, one family per file, as `keras.layers` lays them out.

Modules:
    arguments: checks and copies of layer arguments.
    gated: gated linear units: GLU with any gate, and the named ones.
    gelu: the GELU layer.
    leaky: leaky ReLU with a learnable slope.
"""

from keras_gelu.layers.arguments import clone_initializer
from keras_gelu.layers.gated import GEGLU
from keras_gelu.layers.gated import GLU
from keras_gelu.layers.gated import Bilinear
from keras_gelu.layers.gated import ReGLU
from keras_gelu.layers.gated import SwiGLU
from keras_gelu.layers.gelu import GELU
from keras_gelu.layers.leaky import LearnableLeakyReLU
from keras_gelu.layers.leaky import leaky
