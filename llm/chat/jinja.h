/* jinja.h: the chat-template engine's shared interface (llm/chat/): values, the syntax tree, the
 * parse and render states, and the functions the modules call in one another. The semantics are
 * Jinja2's (3.1, as Hugging Face's apply_chat_template sets it up: an ImmutableSandboxedEnvironment
 * with trim_blocks, lstrip_blocks and loopcontrols); the public contract is nuvec_llm/chat.h.
 *
 * Memory: everything a parse or a render makes comes from one arena (jarena), freed at once; a
 * template's tree and constants live in the template's arena, a render's values in the render's.
 * Errors: j_fail() records the failure in the state and longjmps to the entry point (parse or
 * render), which frees the arena; so no function below cleans up after a failure, and nothing
 * they allocate outside the arena.
 *
 * Modules: arena and values (value.c), text (unicode.c, unicode_data.c), printing and JSON out
 * (format.c), JSON in (json.c), lexer.c, parser.c + parse_expr.c, evaluation (eval.c, exec.c),
 * filters.c, predicates.c (`is` tests), methods.c (str/dict/list methods and the globals),
 * template.c (the public API) and source.c (templates from model files, contexts). */
#ifndef NU_LLM_CHAT_JINJA_H
#define NU_LLM_CHAT_JINJA_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec/status.h"
#include "nuvec_llm/chat.h"

/* ---- Arena ---------------------------------------------------------------------------- */

typedef struct jchunk jchunk;
typedef struct jarena {
    jchunk *head;
    size_t used, limit; /* bytes taken from the host; limit 0: none */
} jarena;

typedef struct jstate jstate;

/* size bytes from st's arena, 8-aligned, uninitialised (j_zalloc: zeroed). Over the limit or
 * out of host memory, j_fail. */
void *j_alloc(jstate *st, size_t size);
void *j_zalloc(jstate *st, size_t size);
void *j_alloc_array(jstate *st, size_t count, size_t size);
void j_arena_free(jarena *a);

/* ---- Values --------------------------------------------------------------------------- */

typedef enum jt {
    JT_UNDEF,  /* Jinja2's default Undefined */
    JT_NONE,
    JT_BOOL,
    JT_INT,    /* Python int within 64 bits (beyond: refused) */
    JT_FLOAT,
    JT_STR,    /* UTF-8; markup set for markupsafe's Markup (|safe) */
    JT_LIST,   /* list, tuple, dict views, range, generators: jlist.kind says which */
    JT_DICT,
    JT_NS,     /* namespace() */
    JT_MACRO,
    JT_FUNC,   /* a builtin function or a bound method */
    JT_LOOP,   /* a for loop's `loop` */
    JT_SLICE,  /* a[b:c:d]'s index while it is evaluated */
    JT_OBJ,    /* cycler() and joiner() objects */
} jt;

typedef struct jstr jstr;
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jundef jundef;
typedef struct jmacro jmacro;
typedef struct jfunc jfunc;
typedef struct jloop jloop;
typedef struct jslice jslice;
typedef struct jobj jobj;

typedef struct jv {
    uint8_t t;      /* jt */
    uint8_t markup; /* JT_STR: a Markup string */
    union {
        bool b;
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d; /* JT_DICT and JT_NS (the namespace's attributes) */
        jundef *u;
        jmacro *m;
        jfunc *fn;
        jloop *loop;
        jslice *sl;
        jobj *obj;
    };
} jv;

struct jstr {
    size_t len;  /* bytes */
    size_t cps;  /* code points (Python's len) */
    char p[];    /* len bytes and a NUL */
};

typedef enum jlk {
    JL_LIST,
    JL_TUPLE,
    JL_ITEMS,    /* dict.items(): not subscriptable, printed dict_items([...]) */
    JL_KEYS,
    JL_VALUES,
    JL_RANGE,    /* range(): printed range(a, b[, c]) */
    JL_GEN,      /* a generator or iterator: used up by iterating, no len, always true */
} jlk;

struct jlist {
    uint8_t kind;          /* jlk */
    size_t n, cap;
    jv *v;
    size_t pos;            /* JL_GEN: items before pos are used up */
    int64_t r[3];          /* JL_RANGE: start, stop, step; n items, v NULL (lazy, as Python's) */
};

/* Item i < l->n of a list of any kind (a range's computed). */
static inline jv j_list_at(const jlist *l, size_t i)
{
    if (l->kind == JL_RANGE) {
        jv v = {.t = JT_INT};
        v.i = l->r[0] + (int64_t)i * l->r[2];
        return v;
    }
    return l->v[i];
}

struct jdict {
    size_t n, cap;         /* entries, in insertion order */
    jv *keys, *vals;
    uint32_t *index;       /* open addressing: entry + 1, 0 empty; icap slots */
    size_t icap;
};

/* An Undefined: how it was made decides the message its use raises. */
typedef enum jux { JU_UNDEFINED, JU_SECURITY } jux;
struct jundef {
    const char *hint;      /* the whole message, or NULL */
    const char *obj_type;  /* "'dict object'"-style type text of the object, or NULL: a missing name */
    jv name;               /* the name or key (a str prints as an attribute, else an element) */
    uint8_t exc;           /* jux */
};

typedef struct jnode jnode;
typedef struct jscope jscope;

struct jmacro {
    const jnode *def;      /* N_MACRO or N_CALLBLOCK / N_GENERATION (the caller) */
    jscope *closure;       /* the scope it was defined in */
    const char *name;
};

typedef enum jfn {
    JF_RANGE, JF_DICT, JF_NAMESPACE, JF_RAISE, JF_STRFTIME, JF_CYCLER, JF_JOINER, JF_LIPSUM,
    JF_METHOD,             /* a bound method: self + method name */
    JF_LOOP_CYCLE, JF_LOOP_CHANGED,
    JF_OBJ_METHOD,         /* cycler.next / cycler.reset */
} jfn;

struct jfunc {
    uint8_t id;            /* jfn */
    jv self;               /* JF_METHOD, JF_LOOP_*, JF_OBJ_METHOD */
    const char *method;    /* JF_METHOD / JF_OBJ_METHOD: its name */
};

struct jslice {
    jv a, b, c;            /* JT_NONE where omitted */
};

typedef enum jok { JO_CYCLER, JO_JOINER } jok;
struct jobj {
    uint8_t kind;          /* jok */
    jlist *items;          /* cycler: the items */
    size_t pos;            /* cycler: the current item */
    jv sep;                /* joiner: the separator */
    bool used;             /* joiner: called before */
};

/* Constructors (render or parse arena). */
static inline jv jv_undef(jundef *u) { jv v = {.t = JT_UNDEF}; v.u = u; return v; }
static inline jv jv_none(void) { return (jv){.t = JT_NONE}; }
static inline jv jv_bool(bool b) { jv v = {.t = JT_BOOL}; v.b = b; return v; }
static inline jv jv_int(int64_t i) { jv v = {.t = JT_INT}; v.i = i; return v; }
static inline jv jv_float(double f) { jv v = {.t = JT_FLOAT}; v.f = f; return v; }
static inline jv jv_strv(jstr *s) { jv v = {.t = JT_STR}; v.s = s; return v; }
static inline jv jv_listv(jlist *l) { jv v = {.t = JT_LIST}; v.l = l; return v; }
static inline jv jv_dictv(jdict *d) { jv v = {.t = JT_DICT}; v.d = d; return v; }

jstr *j_str_new(jstate *st, const char *p, size_t len);
jv j_str(jstate *st, const char *p, size_t len);
jv j_cstr(jstate *st, const char *s);
jv j_strf(jstate *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
jv j_empty_str(void);
jlist *j_list_new(jstate *st, jlk kind, size_t cap);
void j_list_push(jstate *st, jlist *l, jv v);
jv j_tuple2(jstate *st, jv a, jv b);
jdict *j_dict_new(jstate *st, size_t cap);
/* Python dict semantics: keys equal as Python's == (1, 1.0 and True are one key); an unhashable
 * key (list, dict, ...) fails as Python's TypeError. set keeps the first key's place. */
void j_dict_set(jstate *st, jdict *d, jv key, jv val);
bool j_dict_get(jstate *st, const jdict *d, jv key, jv *val);
/* Empties d, keeping its storage. */
void j_dict_clear(jdict *d);
/* Lookup by a string key without making a value. */
bool j_dict_gets(const jdict *d, const char *key, size_t len, jv *val);
jundef *j_undef_new(jstate *st, const char *hint, jv obj, bool has_obj, jv name, jux exc);
jv j_undef_name(jstate *st, const char *name);
jv j_undef_hint(jstate *st, const char *hint);
jv j_undef_attr(jstate *st, jv obj, jv name);

/* Python semantics. */
bool j_truthy(jstate *st, jv v);
bool j_equal(jstate *st, jv a, jv b);
/* a < b (-1), == (0), > (1) for the ordered types; TypeError otherwise (op names the operator). */
int j_compare(jstate *st, jv a, jv b, const char *op);
/* len(v), or j_fail (TypeError) for values without one. */
size_t j_len(jstate *st, jv v);
/* Python's type(v).__name__: "str", "int", "dict", "NoneType", "Undefined", ... */
const char *j_type_name(jv v);
/* Jinja2's object_type_repr: "'dict object'", "'None'", ... with the quotes. */
const char *j_obj_type(jstate *st, jv v);
/* Raises the error an Undefined carries. */
_Noreturn void j_undef_raise(jstate *st, jv v);
/* Fails if v is undefined (for operations every Undefined refuses). */
static inline void j_need_defined(jstate *st, jv v) { if (v.t == JT_UNDEF) j_undef_raise(st, v); }

/* Iteration as Python's iter(): lists by index (a list popped while iterated ends early, as in
 * Python), dicts by key, strings by character, generators consume. */
typedef struct jiter {
    jv src;
    size_t i;
} jiter;
void j_iter_start(jstate *st, jv v, jiter *it);
bool j_iter_next(jstate *st, jiter *it, jv *out);
/* All of an iterable as a new list (JL_LIST). */
jlist *j_to_list(jstate *st, jv v);

/* ---- Text ------------------------------------------------------------------------------ */

/* UTF-8 decoding of well-formed text (everything inside is checked at the edges). */
uint32_t j_utf8_next(const char *p, const char *end, size_t *len);
size_t j_utf8_put(char *out, uint32_t cp);
/* Whether s[0..len) is valid UTF-8 (RFC 3629); *bad gets the first bad byte's offset. */
bool j_utf8_valid(const char *s, size_t len, size_t *bad);
size_t j_utf8_count(const char *s, size_t len);
/* Byte offset of code point index i in s (i <= cps). */
size_t j_utf8_offset(const jstr *s, size_t i);
/* Python's str.isspace() for one code point (the same set as re's \s on str). */
bool j_isspace(uint32_t cp);
/* Python's str.isprintable() for one code point. */
bool j_isprintable(uint32_t cp);
/* Unicode case mapping as Python's str.upper() / lower() / title() per code point: writes up to
 * 3 code points, returns how many. j_case_lower maps U+03A3 to the medial sigma; lowering text
 * goes through j_case_lower_at, which applies Python's Final_Sigma rule from the surrounding
 * text s[start .. end). */
int j_case_upper(uint32_t cp, uint32_t out[3]);
int j_case_lower(uint32_t cp, uint32_t out[3]);
int j_case_lower_at(const char *start, const char *at, const char *end, uint32_t out[3]);
int j_case_title(uint32_t cp, uint32_t out[3]);
bool j_case_ignorable(uint32_t cp);
uint32_t j_lower_sigma(const char *start, const char *at, const char *end);
/* Unicode properties Python's islower/isupper/istitle/title use. */
bool j_is_lower(uint32_t cp);
bool j_is_upper(uint32_t cp);
bool j_is_titlecase(uint32_t cp);
bool j_is_cased(uint32_t cp);

/* ---- Growable byte buffers (arena) -------------------------------------------------------- */

typedef struct jbuf {
    char *p;
    size_t len, cap;
    size_t limit; /* bytes it may hold; 0: none (checked by j_buf_*) */
} jbuf;
void j_buf_add(jstate *st, jbuf *b, const char *p, size_t len);
void j_buf_addc(jstate *st, jbuf *b, char c);
void j_buf_adds(jstate *st, jbuf *b, const char *s);
void j_buf_addf(jstate *st, jbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void j_buf_addcp(jstate *st, jbuf *b, uint32_t cp);
jv j_buf_str(jstate *st, jbuf *b);
/* The same, a Markup string when `markup` (what markupsafe's methods give back). */
jv j_buf_str_markup(jstate *st, jbuf *b, bool markup);

/* ---- Printing (format.c) -------------------------------------------------------------- */

/* str(v) appended to b (Undefined: nothing); values whose str() Python would print with an
 * address (functions, generators) are refused. */
void j_to_str(jstate *st, jbuf *b, jv v);
/* str(v) as a string value (the value itself when it is a plain string). */
jv j_str_of(jstate *st, jv v);
/* repr(v). */
void j_repr(jstate *st, jbuf *b, jv v);
/* Python's repr of a float. */
void j_float_repr(jstate *st, jbuf *b, double f);
/* json.dumps(v, ensure_ascii=, indent=, separators=, sort_keys=) as transformers' tojson. */
typedef struct jjson_opts {
    bool ensure_ascii;
    bool indent_set;
    const char *indent;    /* the indent string (an int n gives n spaces) */
    size_t indent_len;
    const char *item_sep, *key_sep;
    size_t item_sep_len, key_sep_len;
    bool sort_keys;
} jjson_opts;
void j_tojson(jstate *st, jbuf *b, jv v, const jjson_opts *o);
/* markupsafe.escape(str(v)) appended to b. */
void j_html_escape(jstate *st, jbuf *b, const char *p, size_t len);

/* ---- JSON in (json.c) ----------------------------------------------------------------- */

/* Parses JSON text as Python's json.loads does (ints stay ints, floats floats, NaN/Infinity
 * accepted, duplicate keys: the last value at the first place). Failure: j_fail with the
 * offset. */
jv j_json_parse(jstate *st, const char *text, size_t len, const char *what);

/* ---- Syntax tree ---------------------------------------------------------------------- */

typedef enum jnk {
    /* expressions */
    N_CONST, N_NAME, N_GETATTR, N_GETITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_NOT, N_NEG,
    N_POS, N_BINOP, N_AND, N_OR, N_CONCAT, N_COMPARE, N_CONDEXPR, N_LIST, N_TUPLE, N_DICT,
    N_NSREF, /* set target ns.attr */
    /* statements */
    N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK, N_WITH,
    N_BREAK, N_CONTINUE, N_GENERATION,
} jnk;

typedef enum jop {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
    OP_EQ, OP_NE, OP_LT, OP_LTEQ, OP_GT, OP_GTEQ, OP_IN, OP_NOTIN,
} jop;

typedef struct jkw {
    const char *name;
    jnode *value;
    jv key;                /* macro parameters: the name as a string value (made at parse time) */
} jkw;

struct jnode {
    uint8_t kind;          /* jnk */
    uint8_t op;            /* N_BINOP: jop; N_FOR: recursive; N_MACRO: uses varargs/kwargs/caller bits */
    uint16_t fid;          /* N_FILTER / N_TEST: the builtin's index (0xffff: unknown, fails when run) */
    uint32_t line;
    jv val;                /* N_CONST; N_NAME: the name as a string value (a scope key, made once) */
    const char *name;      /* N_NAME, N_GETATTR's attribute, filter/test/macro names, N_NSREF's attr */
    jnode *a, *b, *c, *d;  /* children: see parser.c for each kind */
    jnode **items;         /* args, list items, output parts, compare operands, body statements */
    size_t n;
    jkw *kw;               /* keyword arguments (N_CALL, N_FILTER, N_TEST) */
    size_t nkw;
    jnode *dyn_args, *dyn_kwargs;
    jnode **body, **orelse; /* statement lists */
    size_t nbody, norelse;
    uint8_t *ops;          /* N_COMPARE: the operator of each operand */
};

/* N_FOR flags in op. */
#define JFOR_RECURSIVE 1
/* N_MACRO / N_CALLBLOCK flags in op. */
#define JM_VARARGS 1
#define JM_KWARGS 2
#define JM_CALLER 4

/* ---- Filters and tests (tables in filters.c, predicates.c) ------------------------------ */

/* The index of a builtin filter / test, or -1; j_*_known: whether Jinja2 has it at all (nuvec
 * refuses at parse time those it knows but lacks). */
int j_filter_find(const char *name);
int j_test_find(const char *name);
bool j_filter_jinja(const char *name);
bool j_test_jinja(const char *name);

/* ---- States ----------------------------------------------------------------------------- */

struct jscope {
    jscope *parent;
    jdict *vars;
    bool dead; /* a loop's scope once the loop is over (a macro made in it may still point here) */
};

typedef struct jrender jrender;

struct jstate {
    jarena arena;
    jmp_buf *jmp;
    nu_status status;
    nu_llm_template_failure failure;
    uint32_t line;         /* the line being run (for messages) */
    char message[512];
    uint32_t depth, depth_limit; /* nesting of recursive work (evaluation, values) */
    jrender *r;            /* render: the render's state, NULL while parsing */
};

/* Records the failure and longjmps to the entry point. */
_Noreturn void j_fail(jstate *st, nu_llm_template_failure kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* j_fail for parse-time failures at a template line. */
#define j_fail_at(st, line_, ...) ((st)->line = (line_), j_fail((st), __VA_ARGS__))
/* A Python TypeError / ValueError-like failure of the template (NU_LLM_TEMPLATE_ERROR). */
#define j_error(st, ...) j_fail((st), NU_LLM_TEMPLATE_ERROR, __VA_ARGS__)
#define j_unsupported(st, ...) j_fail((st), NU_LLM_TEMPLATE_UNSUPPORTED, __VA_ARGS__)

/* A parsed template (the public nu_llm_template). */
struct nu_llm_template {
    jstate st;             /* its arena holds the tree */
    jnode **body;
    size_t nbody;
};

struct jrender {
    jstate *st;
    const nu_llm_template *tpl;
    jbuf *out;             /* where output goes now (captures push their own) */
    size_t output_limit;
    uint64_t steps, step_limit;
    int64_t now_s;         /* strftime_now's time; 0: the clock */
    jscope *root;          /* the template's top-level scope (its parent holds the context) */
    jv key_loop, key_caller, key_varargs, key_kwargs; /* scope keys made once */
};

/* Counts work toward the step limit (n units); fails past it. */
void j_charge(jstate *st, uint64_t n);
/* Enters / leaves one level of evaluation nesting (depth limit). */
void j_enter(jstate *st);
static inline void j_leave(jstate *st) { st->depth--; }

/* ---- Parsing (lexer.c, parser.c, parse_expr.c) ------------------------------------------- */

typedef enum jtk {
    TK_EOF, TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT,
    /* operators */
    TK_ADD, TK_SUB, TK_DIV, TK_FLOORDIV, TK_MUL, TK_MOD, TK_POW, TK_TILDE, TK_LBRACKET,
    TK_RBRACKET, TK_LPAREN, TK_RPAREN, TK_LBRACE, TK_RBRACE, TK_EQ, TK_NE, TK_GT, TK_GTEQ,
    TK_LT, TK_LTEQ, TK_ASSIGN, TK_DOT, TK_COLON, TK_PIPE, TK_COMMA, TK_SEMICOLON,
} jtk;

typedef struct jtoken {
    uint8_t type;          /* jtk */
    uint32_t line;
    const char *p;         /* TK_NAME: NUL-terminated copy; TK_DATA / TK_STRING: decoded text */
    size_t len;
    int64_t i;             /* TK_INT */
    double f;              /* TK_FLOAT */
} jtoken;

/* Tokenizes the whole source as Jinja2's lexer with trim_blocks and lstrip_blocks. */
void j_lex(jstate *st, const char *src, size_t len, jtoken **tokens, size_t *count);
const char *j_token_desc(const jtoken *t);

typedef struct jparser {
    jstate *st;
    jtoken *t;
    size_t n, pos;
    uint32_t depth;        /* nesting of expressions (brackets, unary operators) */
    uint32_t blocks;       /* nesting of blocks */
    uint32_t loops;        /* for loops around (break / continue), reset by macros */
    uint32_t soft;         /* inside if / conditional expressions (Jinja2's soft frames) */
    const struct ends *ends; /* the blocks being parsed (parser.c), for messages */
} jparser;

jnode *j_node(jparser *p, jnk kind, uint32_t line);
/* Appends x to the growing array items[0 .. *n) of capacity *cap. */
void j_push_node(jparser *p, jnode ***items, size_t *n, size_t *cap, jnode *x);
/* Appends {name, value, key} to n->kw (capacity *cap). */
void j_push_kw(jparser *p, jnode *n, size_t *cap, const char *name, jnode *value, jv key);
jtoken *j_cur(jparser *p);
jtoken *j_look(jparser *p);
void j_next(jparser *p);
bool j_is_name(const jtoken *t, const char *name);
bool j_skip_name(jparser *p, const char *name);
bool j_skip(jparser *p, jtk type);
jtoken *j_expect(jparser *p, jtk type);
void j_expect_name(jparser *p, const char *name);
_Noreturn void j_syntax(jparser *p, uint32_t line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

jnode *j_parse_expression(jparser *p, bool with_condexpr);
jnode *j_parse_tuple(jparser *p, bool simplified, bool with_condexpr, const char *const *extra_end,
                     bool explicit_parens);
jnode *j_parse_primary(jparser *p);
jnode *j_parse_filter(jparser *p, jnode *node, bool start_inline);
void j_parse_call_args(jparser *p, jnode *call);
void j_parse_template(jparser *p, jnode ***body, size_t *n);

/* ---- Evaluation (eval.c, exec.c) ------------------------------------------------------------ */

jv j_eval(jstate *st, jscope *sc, const jnode *n);
/* Looks a name up through the scopes, the context and the globals (Undefined when missing). */
jv j_lookup(jstate *st, jscope *sc, const char *name);
jscope *j_scope_new(jstate *st, jscope *parent);
void j_scope_set(jstate *st, jscope *sc, const char *name, jv v);
/* The same with the name as a string value (no allocation once the scope has room). */
void j_scope_setv(jstate *st, jscope *sc, jv key, jv v);
/* obj.name and obj[key] as the sandbox's getattr / getitem. */
jv j_getattr(jstate *st, jv obj, const char *name);
/* getattr() alone (no item fallback): *found false when obj has no such attribute. */
jv j_attr_only(jstate *st, jv obj, const char *name, bool *found);
jv j_getitem(jstate *st, jv obj, jv key);
/* Calls a callable value with evaluated arguments. */
typedef struct jargs {
    jv *pos;
    size_t npos;
    const char **kwn;
    jv *kwv;
    size_t nkw;
} jargs;
jv j_call(jstate *st, jv callee, jargs *args);
jv j_binop(jstate *st, int op, jv a, jv b);
/* str % args (printf-style formatting, the conversions templates use). */
jv j_printf_format(jstate *st, jv fmt, jv args);
/* A call with one more keyword argument (a call block passes caller). */
jv j_eval_call_with(jstate *st, jscope *sc, const jnode *call, const char *kw, jv v);
/* Applies a filter node (its arguments evaluated in sc) to input. */
jv j_apply_filter_node(jstate *st, jscope *sc, const jnode *n, jv input);
bool j_contains(jstate *st, jv container, jv item);
/* Statements: returns what ended the list (normal, break or continue). */
typedef enum jflow { JFLOW_NORMAL, JFLOW_BREAK, JFLOW_CONTINUE } jflow;
jflow j_exec_body(jstate *st, jscope *sc, jnode *const *body, size_t n);
/* Runs a body into a new buffer and returns the text (the string a macro call or a block gives). */
jv j_capture(jstate *st, jscope *sc, jnode *const *body, size_t n);
jv j_macro_call(jstate *st, jmacro *m, jargs *args);
/* Calls a loop (recursive loops' loop(items)). */
jv j_loop_recurse(jstate *st, jloop *loop, jv items);
jv j_loop_attr(jstate *st, jloop *loop, const char *name, bool *found);
jv j_loop_changed(jstate *st, jloop *loop, jargs *args);
jv j_loop_cycle(jstate *st, jloop *loop, jargs *args);

/* Applies builtin filter `fid` to v with evaluated arguments. */
jv j_filter_apply(jstate *st, int fid, const char *name, jv v, jargs *args);
bool j_test_apply(jstate *st, int tid, const char *name, jv v, jargs *args);
/* Calls method `name` of a str, dict or list value (bound methods and calls of obj.name(...)). */
bool j_has_method(jv self, const char *name, bool *unsafe);
jv j_method_call(jstate *st, jv self, const char *name, jargs *args);
/* The builtin functions: globals' lookup and calls. */
bool j_global(const char *name, jv *out);
jv j_func_call(jstate *st, jfunc *fn, jargs *args);

/* Argument binding as Python binds a signature: spec is "name=default,..." where a default is
 * one of: none, true, false, an integer, '' (empty string) or "!" (required). Fills out[0..k). */
void j_bind(jstate *st, const char *fname, const char *spec, jargs *args, jv *out, size_t k);

#endif
