"""Numbers that both the `keras.ops` formulas and the torch kernels read.

Imports nothing: `activations/formulas.py` (every backend) and
`activations/torch_kernels.py` (torch only) take them from here, so
neither reaches into the other (issue 16: the torch kernels imported two
private names from the formulas' module).
"""

# QuickGELU's slope, x * sigmoid(1.702 x): the GELU paper's sigmoid approximation
# (Hendrycks & Gimpel 2016).
SIGMOID_SCALE = 1.702

# Past |x| = 10 the tanh is exactly +-1 in float32, so clipping its
# argument changes no value while keeping x**3 finite: no inf * 0 = NaN in
# the gradient for huge inputs.
TANH_CLIP = 10.0

# sigmoid(z) is exactly 0 below z = -104 in float32 (subnormals included)
# and 1 above z = 17, so x * sigmoid(x) and x * sigmoid(1.702 x) are -0
# below -128 and x above 128 (and their derivatives 0 and 1).
SIGMOID_CLIP = 128.0
