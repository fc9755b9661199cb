"""Qualified names of the JAX APIs the static check models.

Names are canonical dotted paths (``jax.numpy.sum``); the interpreter resolves a local spelling
(``jnp.sum`` after ``import jax.numpy as jnp``) to one of these through the file's imports.
Everything not listed is unknown to the check, which then stays silent about values that flow
through it.
"""

from __future__ import annotations

import ast

# Memory kinds live in the model; the interpreter reads them here with the API names.
from offload_fixer import jax_compat
from offload_fixer.model import HOST_KINDS, HOST_MEMORY_SPACE_KINDS  # noqa: F401 - re-exported


def import_binding(statement: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, str]:
    """The name one alias of an import binds in its scope, and the qualified name it binds it
    to: ``import a.b`` binds ``a`` to ``a``, ``import a.b as c`` ``c`` to ``a.b``, ``from a
    import b as c`` ``c`` to ``a.b``; a relative import's qualified name keeps its dots
    (``from ..a import b``: ``..a.b``), and ``from a import *`` binds ``*``. The one reading
    of an import for the prefilter, the candidates, the project's bindings and the increments."""
    if isinstance(statement, ast.Import):
        if alias.asname:
            return alias.asname, alias.name
        head = alias.name.split(".")[0]
        return head, head
    module = statement.module
    qualname = "." * (statement.level or 0) + (f"{module}.{alias.name}" if module else alias.name)
    return alias.asname or alias.name, qualname


JIT = frozenset({"jax.jit", "jax.pjit", "jax.experimental.pjit.pjit"})
PARTIAL = frozenset({"functools.partial"})
WRAPS = frozenset({"functools.wraps"})
DEVICE_PUT = frozenset({"jax.device_put"})
ARRAY_TYPES = frozenset({"jax.Array", "jax.numpy.ndarray"})
"""What ``isinstance(x, ...)`` tests for a JAX array."""
BLOCK_UNTIL_READY = frozenset({"jax.block_until_ready"})
"""Waits for a pytree's arrays and returns it: each leaf where it was."""
SHARDING_CLASSES = frozenset(
    {
        "jax.sharding.NamedSharding",
        "jax.NamedSharding",
        "jax.sharding.SingleDeviceSharding",
        "jax.sharding.PositionalSharding",
        "jax.sharding.GSPMDSharding",
    }
)
SHARDING_PLACEMENTS = {
    "jax.sharding.NamedSharding": "mesh",
    "jax.NamedSharding": "mesh",
    "jax.sharding.SingleDeviceSharding": "single",
}
"""How a sharding class places an array: on one device, or over a mesh's devices."""
MESH_CONSTRUCTORS = {"jax.make_mesh": "make_mesh", "jax.sharding.Mesh": "Auto"}
"""Each mesh constructor, and its axes' type where the call names none (``make_mesh``: the JAX
version's default)."""
AXIS_TYPES = {f"jax.sharding.AxisType.{kind}": kind for kind in ("Auto", "Explicit", "Manual")}
ARRAY_CREATION = frozenset(f"jax.numpy.{n}" for n in "zeros ones empty full arange linspace eye identity".split())
"""New arrays from a shape (or a length), in device memory."""
ARRAY_CREATION_LIKE = frozenset(f"jax.numpy.{n}" for n in "zeros_like ones_like empty_like full_like".split())
"""New arrays shaped like another."""
SPACE_HOST = frozenset(api.host for api in jax_compat.MEMORY_SPACE_APIS)
SPACE_DEVICE = frozenset(api.device for api in jax_compat.MEMORY_SPACE_APIS)
DEVICE_LISTS = frozenset({"jax.devices", "jax.local_devices"})
VMAP = frozenset({"jax.vmap"})
SHARD_MAP = frozenset({"jax.shard_map", "jax.experimental.shard_map.shard_map"})
CHECKPOINT = frozenset({"jax.checkpoint", "jax.remat", "jax.ad_checkpoint.checkpoint"})
CUSTOM_JVP = frozenset({"jax.custom_jvp"})
CUSTOM_VJP = frozenset({"jax.custom_vjp"})
COMPUTE_ON = frozenset({"jax.experimental.compute_on.compute_on"})
"""Its context form (``compute_on("device_host")``, to 0.11.0) or its function form (from
0.11.1), told apart by the call (``jax_compat.HostCompute``)."""
COMPUTE_ON_FUNCTION = frozenset({"jax.experimental.compute_on.compute_on2"})
"""The function form's name beside the context manager, JAX 0.10.1 - 0.11.0."""
STATICMETHOD = "builtins.staticmethod"
PROPERTY = "builtins.property"
GRAD = frozenset({"jax.grad"})
OPTAX_WITH_STATE = frozenset(
    f"optax.{n}"
    for n in """
    adam adamw adamax adamaxw nadam nadamw radam amsgrad lamb lion lars rmsprop adagrad adafactor
    adabelief yogi novograd sm3 adadelta rprop
    """.split()
)
"""optax optimizers whose state holds per-parameter moments: an update reads them."""
OPTAX_SGD = "optax.sgd"
"""Stateful only with ``momentum`` (its second parameter)."""
OPTAX_CHAIN = "optax.chain"
OPTAX_APPLY_UPDATES = "optax.apply_updates"
NNX_SPLIT = frozenset({"flax.nnx.split"})
NNX_STATE = frozenset({"flax.nnx.state"})
NNX_MERGE = frozenset({"flax.nnx.merge"})
DATACLASS = frozenset({"dataclasses.dataclass", "flax.struct.dataclass", "chex.dataclass"})
PYTREE_REGISTRATIONS = frozenset({"jax.tree_util.register_dataclass", "jax.tree_util.register_static"})
"""Decorators that register a dataclass as a pytree: the class is still the dataclass."""
NAMED_TUPLE = frozenset({"typing.NamedTuple"})
DATACLASS_FIELD = frozenset({"dataclasses.field", "flax.struct.field"})
DATACLASS_REPLACE = frozenset({"dataclasses.replace"})
VALUE_AND_GRAD = frozenset({"jax.value_and_grad"})

TREE_MAP = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map"})
TREE_LEAVES = frozenset({"jax.tree.leaves", "jax.tree_util.tree_leaves", "jax.tree_leaves"})
LAX_SCAN = "jax.lax.scan"
LAX_MAP = "jax.lax.map"
LAX_FORI = "jax.lax.fori_loop"
LAX_WHILE = "jax.lax.while_loop"
LAX_COND = "jax.lax.cond"
LAX_SWITCH = "jax.lax.switch"

PYTREE_PRESERVING = {
    # op -> name shown in the trace; these keep the pytree structure and every leaf's data.
    "jax.lax.stop_gradient": "stop_gradient",
    "jax.lax.optimization_barrier": "optimization_barrier",
    "jax.lax.with_sharding_constraint": "with_sharding_constraint",
    "jax.experimental.pjit.with_sharding_constraint": "with_sharding_constraint",
}
COPIES = frozenset({"jax.numpy.copy", "jax.numpy.array", "jax.numpy.asarray"})
"""Copies keep a value where it is; JAX 0.4.29-0.7.0 propagates a kind through ``copy`` only
for some of these, so a copied host output is left undecided in that regime."""


def is_transfer_to_memory_kind(qualname: str) -> bool:
    """``TransferToMemoryKind`` lives in private modules that moved between releases."""
    return qualname.startswith("jax.") and qualname.endswith(".TransferToMemoryKind")


_JNP_COMPUTE = """
abs absolute negative positive sign exp exp2 expm1 log log1p log2 log10 sqrt cbrt square
reciprocal sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh asin acos
atan asinh acosh atanh floor ceil trunc rint round around fix real imag conj conjugate angle
isnan isinf isfinite logical_not invert bitwise_not bitwise_invert signbit deg2rad rad2deg
degrees radians sinc i0 nan_to_num add subtract multiply divide true_divide floor_divide power
pow mod remainder fmod maximum minimum fmax fmin arctan2 atan2 hypot logaddexp logaddexp2 equal
not_equal less less_equal greater greater_equal logical_and logical_or logical_xor bitwise_and
bitwise_or bitwise_xor left_shift right_shift bitwise_left_shift bitwise_right_shift copysign
nextafter heaviside ldexp gcd lcm float_power reshape ravel transpose permute_dims swapaxes
moveaxis squeeze expand_dims broadcast_to flip fliplr flipud rot90 roll tile repeat concatenate
concat stack hstack vstack dstack column_stack pad take take_along_axis select where clip
matrix_transpose diagonal diag trace tril triu outer inner dot vdot vecdot matmul tensordot
einsum kron cross cumsum cumprod cumulative_sum cumulative_prod diff sort argsort sum prod mean
std var max min amax amin argmax argmin any all median nanmean nansum nanmax nanmin nanprod
nanstd nanvar interp searchsorted polyval convolve correlate isclose astype float16 float32
float64 bfloat16 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool_ complex64 complex128
"""
_LAX_COMPUTE = """
add sub mul div rem pow max min neg abs exp exp2 log log1p expm1 sqrt rsqrt cbrt tanh logistic
sin cos tan sign floor ceil round is_finite square integer_pow erf erfc erf_inv lgamma digamma
convert_element_type bitcast_convert_type reduce_precision reshape transpose broadcast_in_dim
broadcast squeeze expand_dims slice slice_in_dim dynamic_slice dynamic_slice_in_dim
dynamic_update_slice dynamic_update_slice_in_dim dynamic_index_in_dim index_in_dim
dynamic_update_index_in_dim concatenate pad select select_n dot dot_general
conv_general_dilated reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or cumsum
cumprod cummax cummin cumlogsumexp clamp gather scatter scatter_add scatter_mul scatter_min
scatter_max rev collapse eq ne lt le gt ge bitwise_and bitwise_or bitwise_xor bitwise_not
shift_left shift_right_logical shift_right_arithmetic psum pmean pmax pmin all_gather ppermute
psum_scatter all_to_all
"""
_NN_COMPUTE = """
relu relu6 gelu silu swish sigmoid log_sigmoid softmax log_softmax softplus soft_sign elu celu
selu glu leaky_relu hard_tanh hard_sigmoid hard_silu hard_swish one_hot standardize logsumexp
mish squareplus sparse_plus sparse_sigmoid tanh dot_product_attention
"""
_SPECIAL_COMPUTE = """
erf erfc erfinv expit logit gammaln digamma xlogy xlog1py ndtr ndtri log_ndtr entr
"""

COMPUTE_FUNCTIONS = frozenset(
    [f"jax.numpy.{n}" for n in _JNP_COMPUTE.split()]
    + [f"jax.lax.{n}" for n in _LAX_COMPUTE.split()]
    + [f"jax.nn.{n}" for n in _NN_COMPUTE.split()]
    + [f"jax.numpy.fft.{n}" for n in "fft ifft rfft irfft fft2 ifft2 fftn ifftn rfftn irfftn".split()]
    + [f"jax.numpy.linalg.{n}" for n in "norm inv det solve matrix_power cholesky pinv".split()]
    + [f"jax.scipy.special.{n}" for n in _SPECIAL_COMPUTE.split()]
)
"""Functions with one array result whose data comes from their array arguments: a host
argument makes the result host compute.  Shape-only functions (``zeros_like``) and functions
with several results (``jnp.split``, ``linalg.eigh``) are deliberately absent."""

MULTI_RESULT_WHEN = {
    # function -> keyword that turns its single result into a tuple
    "jax.numpy.average": "returned",
    "jax.nn.logsumexp": "return_sign",
}
SLICES = frozenset(
    f"jax.lax.{n}"
    for n in "slice slice_in_dim dynamic_slice dynamic_slice_in_dim dynamic_index_in_dim index_in_dim".split()
)
"""Slices: of a host parameter XLA makes a DMA, and a slice that feeds a move to device is the
streaming idiom (a layer taken from a host stack), so neither is host compute by itself."""
SINGLE_POSITIONAL_ONLY = frozenset({"jax.numpy.where"})
"""``jnp.where(c)`` returns a tuple of index arrays; only the 3-argument form is modelled."""

MAYBE_IDENTITY = frozenset(
    [
        f"jax.numpy.{n}"
        for n in """
    reshape ravel transpose permute_dims matrix_transpose swapaxes moveaxis squeeze broadcast_to
    atleast_1d atleast_2d atleast_3d real conj conjugate positive round around rint fix floor ceil
    trunc nan_to_num clip abs absolute pad tile repeat roll astype float16 float32 float64
    bfloat16 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool_ complex64 complex128
    """.split()
    ]
    + [
        f"jax.lax.{n}"
        for n in """
    convert_element_type bitcast_convert_type reduce_precision reshape transpose squeeze
    broadcast_in_dim broadcast expand_dims collapse pad rev
    """.split()
    ]
    + [
        f"method.{n}"
        for n in """
    reshape astype transpose squeeze ravel flatten swapaxes clip round conj conjugate view repeat
    """.split()
    ]
    + ["attribute.T", "attribute.mT", "attribute.real", "operator.plus"]
)
"""Operations JAX skips when they would not change the value (``astype`` to the same dtype,
``reshape`` to the same shape, ``.T`` of a vector, ``jnp.floor`` of integers, ``x[:]``):
they then keep a propagated memory kind. Without shapes and dtypes the check cannot tell,
so in 0.4.29-0.7.0 a host value that went only through these is left undecided."""
SINGLE_OPERAND_IDENTITY = frozenset(
    f"jax.numpy.{n}" for n in "concatenate concat hstack vstack dstack column_stack einsum".split()
)
"""Identity when given one array (``jnp.concatenate([x])``), an operation otherwise."""

ARRAY_METHODS = frozenset(
    """reshape astype transpose sum mean max min prod squeeze ravel flatten swapaxes clip round
    conj conjugate cumsum cumprod argmax argmin std var dot any all repeat take view""".split()
)
ARRAY_ATTRIBUTES = frozenset({"T", "mT", "real", "imag"})
ARRAY_PROPERTIES = frozenset(
    """shape ndim size dtype at sharding aval itemsize nbytes device devices committed weak_type
    format layout addressable_shards global_shards is_fully_addressable is_fully_replicated""".split()
)
"""Attributes of an array that are not pytree children: an attribute of an argument that is a
pytree of arrays (``state.params``) is one of its subtrees unless it is one of these."""
AT_METHODS = frozenset({"set", "add", "subtract", "multiply", "mul", "divide", "min", "max", "power", "get", "apply"})
MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "sort", "reverse"}
)

from offload_fixer.model import DEVICE_KINDS  # noqa: E402,F401  (memory kinds live in the model)
