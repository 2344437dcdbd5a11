"""keras_gelu's layers, one family per file, as `keras.layers` lays them out."""

from keras_gelu.layers.arguments import clone_initializer
from keras_gelu.layers.gated import GEGLU
from keras_gelu.layers.gated import GLU
from keras_gelu.layers.gated import Bilinear
from keras_gelu.layers.gated import ReGLU
from keras_gelu.layers.gated import SwiGLU
from keras_gelu.layers.gelu import GELU
from keras_gelu.layers.leaky import LearnableLeakyReLU
from keras_gelu.layers.leaky import leaky
