"""keras_gelu: GELU in every mode, gated units and FFN blocks for Keras 3.

`import keras_gelu` imports Keras and registers every object a `.keras`
file may name (`keras_gelu>gelu`, `keras_gelu>GEGLU`, ...), whatever the
order of the imports: a model saved with `activation=keras_gelu.gelu`
loads after `import keras_gelu`, before or after `import keras`.

The one table of activation names is a package of its own beside this
one, `keras_gelu_names`, importing nothing: a tool that must read it
without paying for Keras (kg-train's config validation) imports it. A lazy
package face (PEP 562) was tried for that and dropped: with it,
`import keras_gelu; import keras; keras.saving.load_model(...)` found no
registered objects.

Modules:
    activations: the functions, and the lookup by name (`get`).
    api: the public names this file hands on.
    blocks: feed-forward blocks built from the layers.
    constants: numbers both the formulas and the torch kernels read.
    layers: the layers, one family per file.
    member_ops: operations over a member axis.
    serialization: registration of the objects for `.keras` files.
    stacking: M copies of a layer as one layer, for vectorized ensembles.
"""

from keras_gelu.api import *  # noqa: F401,F403
from keras_gelu.api import __all__  # noqa: F401

# A development release (PEP 440): it sorts after 0.1.0 and before 0.2.0, so a
# model saved from the tree says it is neither (issue 30 §22).
__version__ = "0.2.0.dev0"
