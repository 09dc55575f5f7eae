"""llm_client: a Python client of the llm tokenizer and model gRPC services.

    from llm_client import Client
    with Client("127.0.0.1:50051", "127.0.0.1:50052", wait_ready=60) as c:
        print(c.generate("The three primary colors are", temperature=0, max_tokens=24).text)

The gRPC stubs (llm_client.pb: tokenizer_pb2, tokenizer_pb2_grpc, model_pb2,
model_pb2_grpc) are generated from proto/llm/v1/*.proto by
`pip install ./clients/python`, or when the project is built (target
llm_client_python) into build/python/llm_client/pb (put build/python on
PYTHONPATH). clients/python/README.md describes the package.

Structured output (generate(..., json_schema=...), regex=, grammar=, choice=,
json_object=True) runs the project's grammar engine through its shared
library libllm_constrain.so (llm_client.constrain says where it is looked
for); everything else works without it.
"""

from .client import Client, Generation, Stream
from .constrain import ConstraintSpec
from .errors import (Cancelled, InvalidArgument, LlmError, ResourceExhausted, SessionNotFound,
                     Unauthenticated, Unavailable, Unsupported)
from .sampling import Sampler, SamplingParams
from .text import StopMatcher, TokenText

__all__ = [
    "Client", "Generation", "Stream", "Sampler", "SamplingParams", "StopMatcher", "TokenText",
    "LlmError", "InvalidArgument", "Unavailable", "ResourceExhausted", "SessionNotFound",
    "Cancelled", "Unauthenticated", "Unsupported", "ConstraintSpec",
]
