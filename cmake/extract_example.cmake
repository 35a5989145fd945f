# Writes OUT: the C code between "<!-- example:begin -->" and "<!-- example:end -->" in IN
# (the README's API example), without the Markdown fence lines.
file(READ ${IN} text)
string(FIND "${text}" "<!-- example:begin -->" b)
string(FIND "${text}" "<!-- example:end -->" e)
if(b EQUAL -1 OR e EQUAL -1)
  message(FATAL_ERROR "${IN} has no example markers")
endif()
math(EXPR len "${e} - ${b}")
string(SUBSTRING "${text}" ${b} ${len} code)
string(REGEX REPLACE "<!-- example:begin -->[^\n]*\n```c\n" "" code "${code}")
string(REGEX REPLACE "```[^`]*$" "" code "${code}")
file(WRITE ${OUT} "${code}")
