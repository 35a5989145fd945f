# Adds the members of the static library ADD to the static library ARCHIVE (with AR's MRI
# script mode): libnuvec.a carries the SPIRV-Tools objects it needs.
set(tmp ${ARCHIVE}.merge)
file(WRITE ${ARCHIVE}.mri "create ${tmp}\naddlib ${ARCHIVE}\naddlib ${ADD}\nsave\nend\n")
execute_process(COMMAND ${AR} -M INPUT_FILE ${ARCHIVE}.mri RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "merging ${ADD} into ${ARCHIVE} failed (${AR} -M: ${rc})")
endif()
file(RENAME ${tmp} ${ARCHIVE})
file(REMOVE ${ARCHIVE}.mri)
