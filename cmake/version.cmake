# version.cmake: writes OUT (gr_version.h) with the version, the git commit of SRC and the CUDA
# toolkit version; run at every build (cmake -P), so the commit is never a stale configure's.
# configure_file leaves OUT untouched when nothing changed: no needless rebuild.
cmake_minimum_required(VERSION 3.25) # policies as the project sets them: @VAR@ stays literal below
execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD OUTPUT_VARIABLE GR_COMMIT
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR GR_COMMIT STREQUAL "")
  set(GR_COMMIT "unknown") # a source tree without git (a tarball)
else()
  execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no OUTPUT_VARIABLE dirty
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT dirty STREQUAL "")
    string(APPEND GR_COMMIT "-dirty")
  endif()
endif()
file(WRITE "${OUT}.in" "#define GR_VERSION \"@VERSION@\"\n#define GR_COMMIT \"@GR_COMMIT@\"\n#define GR_CUDA_VERSION \"@CUDA@\"\n")
configure_file("${OUT}.in" "${OUT}" @ONLY)
