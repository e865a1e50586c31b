"""Model parallelism: meshes of devices and the layouts that split tensors over them."""
