import mindspore
import no_such_module_strategist  # noqa: F401
