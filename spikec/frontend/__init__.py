"""The frontend: trace a multi-step PyTorch model into the IR with torch.fx, through a converter registry.

``trace(model, input_shape, input_kind=..., ceiling=...)`` returns a verified graph. Teach it a module type
with ``register_converter(cls, fn)`` and a function or method with ``register_function(target, fn)``
(signatures in ``spikec.frontend.registry``). Layout: ``registry`` (imports no converter); the converter modules
``torch_modules``, ``torch_functions``, ``sdna``, ``snntorch``, ``spikingjelly`` (each imports the registry,
never ``tracing``); ``tracing`` (imports the registry and, for their registrations, the converter modules). A converter module of a
third-party framework imports the framework only inside a function it registers with ``on_framework(package)``:
the registry runs it once the model's code has imported the framework (``load_frameworks``), so a model that uses
none pays for none.
"""
from spikec.frontend.registry import (CONVERTERS, FUNCTIONS, ConvertContext, load_frameworks,  # noqa: F401
                                      on_framework, register_converter, register_function)
from spikec.frontend.tracing import trace  # noqa: F401
