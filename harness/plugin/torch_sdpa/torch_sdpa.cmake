# Included by harness/plugin/CMakeLists.txt. plugin:torch_* needs libtorch 2.x (PyTorch's CMake package), which
# CI does not have: OFF by default, so the normal build and CI never look for it.
#   cmake -S . -B build -DATTNCHECK_TORCH_SDPA=ON -DCMAKE_PREFIX_PATH=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
option(ATTNCHECK_TORCH_SDPA "Build the PyTorch SDPA plugin (harness/plugin/torch_sdpa; needs libtorch 2.x)" OFF)
if(ATTNCHECK_TORCH_SDPA)
  add_subdirectory(torch_sdpa)
endif()
