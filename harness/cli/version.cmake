# version.cmake — writes OUT, the header that names this attncheck for `attncheck --version` and the JSON report's
# run.attncheck: `git describe --always --dirty` of SOURCE_DIR (a commit, "-dirty" with uncommitted changes), or
# "unknown" outside a git checkout. Run at every build (harness/CMakeLists.txt); OUT is rewritten only when the text
# changes, so an unchanged tree recompiles nothing.
cmake_minimum_required(VERSION 3.19)  # file(CONFIGURE), file(REAL_PATH)
set(version "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  # Only SOURCE_DIR's own repository: a copy without .git inside another checkout would name that one's commit.
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" rev-parse --show-toplevel
                  OUTPUT_VARIABLE top OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE status ERROR_QUIET)
  file(REAL_PATH "${SOURCE_DIR}" source_real)
  if(status EQUAL 0 AND NOT top STREQUAL "")
    file(REAL_PATH "${top}" top_real)
  endif()
  if(status EQUAL 0 AND top_real STREQUAL source_real)
    execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
                    OUTPUT_VARIABLE described OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE status ERROR_QUIET)
    if(status EQUAL 0 AND NOT described STREQUAL "")
      set(version "${described}")
    endif()
  endif()
endif()
file(CONFIGURE OUTPUT "${OUT}" CONTENT "#define ATTNCHECK_VERSION \"@version@\"\n" @ONLY)
