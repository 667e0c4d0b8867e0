# version.cmake — writes OUT, the header that names this attncheck for `attncheck --version` and the JSON report's
# run.attncheck: `git describe --always --dirty` of SOURCE_DIR (a commit, "-dirty" with uncommitted changes), or
# "unknown" outside a git checkout. Run at every build (harness/CMakeLists.txt); OUT is rewritten only when the text
# changes, so an unchanged tree recompiles nothing.
cmake_minimum_required(VERSION 3.18)  # file(CONFIGURE)
set(version "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
                  OUTPUT_VARIABLE described OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE status ERROR_QUIET)
  if(status EQUAL 0 AND NOT described STREQUAL "")
    set(version "${described}")
  endif()
endif()
file(CONFIGURE OUTPUT "${OUT}" CONTENT "#define ATTNCHECK_VERSION \"@version@\"\n" @ONLY)
