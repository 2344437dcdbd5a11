"""One layer test helper: Keras's own harness, as Keras and keras-hub use it.

`keras.src.testing.TestCase.run_layer_test` builds a layer, calls it
symbolically and eagerly, checks output shape and dtype, weight counts,
masking, a training step, mixed precision and a serialization round trip;
`run_class_serialization_test` is that round trip alone (`get_config` ->
`from_config`, and `serialize_keras_object` -> `deserialize_keras_object`,
with equal configs and attributes). Every keras_gelu layer test that
builds or round-trips a layer goes through here (issue 16).
"""

from keras.src.testing import TestCase


class _Harness(TestCase):
    """Keras's TestCase, used for its checks outside unittest's runner."""


def run_layer_test(
    layer_cls, init_kwargs, input_shape, output_shape, trainable_weights,
    supports_masking=True,
):
    """Keras's full layer check, for a layer with no non-trainable weights,
    seed generators or losses (every keras_gelu layer)."""
    _Harness().run_layer_test(
        layer_cls,
        init_kwargs=init_kwargs,
        input_shape=input_shape,
        expected_output_shape=output_shape,
        expected_num_trainable_weights=trainable_weights,
        expected_num_non_trainable_weights=0,
        expected_num_seed_generators=0,
        expected_num_losses=0,
        supports_masking=supports_masking,
        run_training_check=True,
        run_mixed_precision_check=True,
    )


def round_trip(layer):
    """`layer` through both of Keras's serialization round trips; returns
    the revived copy (configs and attributes checked equal)."""
    return _Harness().run_class_serialization_test(layer)
