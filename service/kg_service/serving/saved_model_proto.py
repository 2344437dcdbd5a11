"""A SavedModel's signatures read from its saved_model.pb, without TensorFlow.

`kg serve` and `kg predict` of a SavedModel folder need only its
serving_default signature's input and output shapes to wrap it in a pyfunc
model; the model itself loads in the server's workers. Loading it here with
`tf.saved_model.load` cost each such command TensorFlow's import and the
model's load, ~7 CPU s (issue 17). The file is read with the protobuf wire
format (https://protobuf.dev/programming-guides/encoding/) and these fields
of tensorflow/core/protobuf/{saved_model,meta_graph}.proto and
tensorflow/core/framework/tensor_shape.proto:

    SavedModel.meta_graphs = 2           MetaGraphDef.signature_def = 5 (map)
    SignatureDef.inputs = 1, outputs = 2 (maps of TensorInfo)
    TensorInfo.dtype = 2, tensor_shape = 3
    TensorShapeProto.dim = 2, unknown_rank = 3
    TensorShapeProto.Dim.size = 1        (a map entry: key = 1, value = 2)

tests/service/serving/test_kg.py checks the result against
`tf.saved_model.load`'s signatures.
"""

import pathlib

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5


def signatures(saved_model):
    """`{signature name: (inputs, outputs)}` of the SavedModel folder's
    first meta graph, each `{tensor name: shape}`, a shape a list of ints
    with None for an unknown size (None for an unknown rank), as
    `tf.saved_model.load(path).signatures` has them; names starting with
    "__" (TensorFlow's own, e.g. the init op) left out.

    Raises:
        ValueError: for a file that is not a SavedModel.
    """
    return _read(saved_model, _shape)


def dtypes(saved_model):
    """As `signatures`, each tensor's dtype name instead of its shape
    ("float32", "string", ...; "DT_<n>" for one not named here)."""
    return _read(saved_model, _dtype)


# tensorflow/core/framework/types.proto's DataType, the ones a model takes.
DTYPES = {
    1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8",
    7: "string", 9: "int64", 10: "bool", 14: "bfloat16", 19: "float16",
}  # fmt: skip


def _dtype(tensor_info):
    code = _one(tensor_info, 2)
    return DTYPES.get(code, f"DT_{code}") if isinstance(code, int) else "unknown"


def _read(saved_model, read):
    data = pathlib.Path(saved_model, "saved_model.pb").read_bytes()
    try:
        graphs = [value for number, value in _fields(data) if number == 2]
        if not graphs:
            raise ValueError("it holds no meta graph")
        found = {}
        for name, signature in _map(graphs[0], 5):
            name = name.decode()
            if not name.startswith("__"):
                found[name] = tuple(
                    {key.decode(): read(info) for key, info in _map(signature, number)}
                    for number in (1, 2)
                )
        return found
    except (IndexError, UnicodeDecodeError, TypeError) as error:
        raise ValueError(f"it is not a SavedModel file ({error})") from None


def _shape(tensor_info):
    shape = _one(tensor_info, 3) or b""
    if _one(shape, 3):
        return None
    return [_size(_one(dim, 1) or 0) for number, dim in _fields(shape) if number == 2]


def _size(value):
    """An int64 size (-1: unknown, as 2**64 - 1 on the wire) as an int or None."""
    value = value - (1 << 64) if value >= 1 << 63 else value
    return None if value < 0 else value


def _map(message, number):
    """`(key, value)` of each entry of map field `number`."""
    for field, entry in _fields(message):
        if field == number:
            yield _one(entry, 1) or b"", _one(entry, 2) or b""


def _one(message, number):
    """The last value of field `number` (protobuf's rule), or None."""
    found = None
    for field, value in _fields(message):
        if field == number:
            found = value
    return found


def _fields(data):
    """`(field number, value)` of each field of a serialized message: an int
    for a varint, bytes otherwise."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        kind = key & 7
        if kind == VARINT:
            value, i = _varint(data, i)
        elif kind == LENGTH_DELIMITED:
            length, i = _varint(data, i)
            value, i = data[i : i + length], i + length
            if i > len(data):
                raise IndexError("a field runs past the end")
        elif kind in (FIXED64, FIXED32):
            width = 8 if kind == FIXED64 else 4
            value, i = data[i : i + width], i + width
        else:
            raise TypeError(f"wire type {kind}")
        yield key >> 3, value


def _varint(data, i):
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7
