/* methods.h: what methods.c (str methods) and builtins.c (dict and list methods, globals,
 * formatting) share. */
#ifndef NU_LLM_CHAT_METHODS_H
#define NU_LLM_CHAT_METHODS_H

#include "jinja.h"

bool m_in(const char *const *list, const char *name);
/* Whether name is a Python str method. */
bool m_str_has(const char *name);
/* Calls str method m on self (a string, Markup or not). */
jv m_str_call(jstate *st, jv self, const char *m, jargs *a);
/* str.format (builtins.c), through the sandbox's attribute and item lookups. */
jv m_format(jstate *st, jv self, jargs *a);

#endif
