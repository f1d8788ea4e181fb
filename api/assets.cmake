# api/assets.cmake: embeds the dashboard (api/assets/*), Chart.js (Debian's libjs-chart.js) and
# api/openapi.yaml (served as JSON; converted with python3-yaml) into gr_api at build time.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
execute_process(COMMAND ${Python3_EXECUTABLE} -c "import yaml" RESULT_VARIABLE GR_NO_YAML OUTPUT_QUIET ERROR_QUIET)
if(GR_NO_YAML)
  message(FATAL_ERROR "python3-yaml is needed to embed api/openapi.yaml (apt-get install python3-yaml)")
endif()

set(GPURED_CHARTJS "" CACHE FILEPATH "Chart.js UMD bundle to embed (default: from Debian's libjs-chart.js)")
if(NOT GPURED_CHARTJS)
  # chart.umd.js: Chart.js 4; chart.min.js: Chart.js 3 (Debian 12)
  find_file(GR_CHARTJS NAMES chart.umd.js chart.min.js PATHS /usr/share/javascript/chart.js NO_DEFAULT_PATH)
  if(NOT GR_CHARTJS)
    message(FATAL_ERROR "Chart.js not found: apt-get install libjs-chart.js, or set -DGPURED_CHARTJS=/path/chart.umd.js")
  endif()
  set(GPURED_CHARTJS ${GR_CHARTJS})
endif()

file(GLOB GR_DASHBOARD CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/api/assets/*)
set(GR_ASSET_ARGS openapi.json=${CMAKE_SOURCE_DIR}/api/openapi.yaml chart.js=${GPURED_CHARTJS})
foreach(f ${GR_DASHBOARD})
  get_filename_component(n ${f} NAME)
  list(APPEND GR_ASSET_ARGS ${n}=${f})
endforeach()
add_custom_command(
  OUTPUT ${CMAKE_BINARY_DIR}/gr_assets.c
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/api/embed_assets.py ${CMAKE_BINARY_DIR}/gr_assets.c ${GR_ASSET_ARGS}
  DEPENDS ${CMAKE_SOURCE_DIR}/api/embed_assets.py ${CMAKE_SOURCE_DIR}/api/openapi.yaml ${GPURED_CHARTJS} ${GR_DASHBOARD}
  COMMENT "Embedding the dashboard, Chart.js and the OpenAPI spec"
  VERBATIM)
target_sources(gr_api PRIVATE ${CMAKE_BINARY_DIR}/gr_assets.c)
