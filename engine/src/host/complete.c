/* Tab completion for the REPL: global names and keywords, fields after "a.b." and methods after
 * "a:". The typed prefix is resolved by raw table lookups, following metatables whose __index is
 * a table (tensor methods, class-like tables); an __index function is only called, protected, to
 * resolve a name the user typed (engine.nn loads on first use that way). */
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include <readline/readline.h>

#include "host/host.h"

#define MAX_INDEX_DEPTH 8 /* __index chains longer than this are not followed */

static lua_State *CL;

typedef struct {
  char *word; /* the whole completed word, typed prefix included */
  int type;   /* the Lua type of the value, or -1 for a keyword */
} candidate_t;

static candidate_t *cands;
static size_t n_cands, cap_cands, next_cand;

static const char *const keywords[] = {
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
    "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while", NULL};

static void clear_candidates(void) {
  for (size_t i = 0; i < n_cands; i++) free(cands[i].word);
  n_cands = next_cand = 0;
}

static int is_name(const char *s, size_t n) {
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return 0;
  }
  return 1;
}

typedef struct {
  const char *text;    /* the word being completed */
  size_t prefix_len;   /* its part up to and including the last '.' or ':' */
  const char *partial; /* its part after that */
  int methods_only;    /* after ':' only functions fit */
} query_t;

/* Adds prefix..name when name extends the partial word (names starting with '_' only when the
 * partial word does too). */
static void offer(const query_t *q, const char *name, size_t len, int type) {
  size_t plen = strlen(q->partial);
  if (len < plen || strncmp(name, q->partial, plen) != 0 || !is_name(name, len)) return;
  if (name[0] == '_' && q->partial[0] != '_') return;
  for (size_t i = 0; i < n_cands; i++)
    if (strlen(cands[i].word) == q->prefix_len + len &&
        strncmp(cands[i].word + q->prefix_len, name, len) == 0)
      return;
  if (n_cands == cap_cands) {
    size_t cap = cap_cands ? 2 * cap_cands : 64;
    candidate_t *grown = realloc(cands, cap * sizeof *grown);
    if (!grown) return;
    cands = grown;
    cap_cands = cap;
  }
  char *word = malloc(q->prefix_len + len + 1);
  if (!word) return;
  memcpy(word, q->text, q->prefix_len);
  memcpy(word + q->prefix_len, name, len);
  word[q->prefix_len + len] = 0;
  cands[n_cands++] = (candidate_t){word, type};
}

/* Replaces the metatable-holding value on top with its __index, if that is a table or function;
 * pops it and returns 0 otherwise. */
static int to_index(lua_State *L) {
  if (!lua_getmetatable(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  lua_pushliteral(L, "__index");
  lua_rawget(L, -2);
  lua_replace(L, -3);
  lua_pop(L, 1);
  if (lua_istable(L, -1) || lua_isfunction(L, -1)) return 1;
  lua_pop(L, 1);
  return 0;
}

static int protected_index(lua_State *L) {
  lua_gettable(L, 1);
  return 1;
}

/* Replaces the value on top with value[key]; returns 0 (top popped) when that is nil or fails. */
static int lookup(lua_State *L, const char *key, size_t len) {
  int obj = lua_gettop(L);
  lua_pushvalue(L, obj);
  for (int depth = 0; depth < MAX_INDEX_DEPTH; depth++) {
    if (lua_isfunction(L, -1)) { /* let Lua run the __index function, protected */
      lua_pop(L, 1);
      lua_pushcfunction(L, protected_index);
      lua_pushvalue(L, obj);
      lua_pushlstring(L, key, len);
      if (lua_pcall(L, 2, 1, 0) != 0) lua_pushnil(L);
      break;
    }
    if (lua_istable(L, -1)) {
      lua_pushlstring(L, key, len);
      lua_rawget(L, -2);
      if (!lua_isnil(L, -1)) break;
      lua_pop(L, 1);
    }
    if (!to_index(L)) {
      lua_pushnil(L);
      break;
    }
  }
  lua_replace(L, obj);
  lua_settop(L, obj);
  if (!lua_isnil(L, -1)) return 1;
  lua_pop(L, 1);
  return 0;
}

/* Pushes the value the dotted expression text[0..len) names (':' is not allowed inside it). */
static int push_path(lua_State *L, const char *text, size_t len) {
  lua_pushvalue(L, LUA_GLOBALSINDEX);
  size_t start = 0;
  while (start <= len) {
    size_t end = start;
    while (end < len && text[end] != '.') end++;
    if (!is_name(text + start, end - start) || !lookup(L, text + start, end - start)) return 0;
    start = end + 1;
  }
  return 1;
}

/* Offers the string keys of the table at index t. */
static void offer_keys(lua_State *L, int t, const query_t *q) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) == LUA_TSTRING && (!q->methods_only || lua_isfunction(L, -1))) {
      size_t len;
      const char *name = lua_tolstring(L, -2, &len);
      offer(q, name, len, lua_type(L, -1));
    }
    lua_pop(L, 1);
  }
}

/* A module table's submodules that are not loaded yet: package.preload["<module>.<name>"]. */
static void offer_preloaded(lua_State *L, int value, const query_t *q) {
  int top = lua_gettop(L);
  lua_pushliteral(L, "package");
  lua_rawget(L, LUA_GLOBALSINDEX);
  if (!lua_istable(L, -1)) goto done;
  lua_pushliteral(L, "loaded");
  lua_rawget(L, top + 1);
  lua_pushliteral(L, "preload");
  lua_rawget(L, top + 1);
  if (!lua_istable(L, -1) || !lua_istable(L, -2)) goto done;
  int loaded = lua_gettop(L) - 1, preload = lua_gettop(L);
  const char *module = NULL;
  size_t mlen = 0;
  lua_pushnil(L);
  while (!module && lua_next(L, loaded)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, value))
      module = lua_tolstring(L, -2, &mlen); /* the key stays on the stack below */
    lua_pop(L, 1);
  }
  if (!module) goto done;
  lua_pushnil(L);
  while (lua_next(L, preload)) {
    size_t len;
    const char *name = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &len) : NULL;
    if (name && len > mlen + 1 && strncmp(name, module, mlen) == 0 && name[mlen] == '.')
      offer(q, name + mlen + 1, len - mlen - 1, LUA_TTABLE);
    lua_pop(L, 1);
  }
done:
  lua_settop(L, top);
}

/* Offers the fields of the value on top: its own keys when a table, then those of the __index
 * tables of its metatables (methods), then submodules not loaded yet. */
static void offer_fields(lua_State *L, const query_t *q) {
  int value = lua_gettop(L);
  lua_pushvalue(L, value);
  for (int depth = 0; depth < MAX_INDEX_DEPTH; depth++) {
    if (lua_istable(L, -1)) offer_keys(L, lua_gettop(L), q);
    if (!to_index(L)) break;
  }
  lua_settop(L, value);
  if (lua_istable(L, value) && !q->methods_only) offer_preloaded(L, value, q);
}

static char *next_candidate(const char *text, int state) {
  (void)text;
  if (state == 0) next_cand = 0;
  return next_cand < n_cands ? strdup(cands[next_cand++].word) : NULL;
}

/* What to type after a single completion: "." after a table, "(" after a function. */
static int append_for(int type) {
  switch (type) {
  case -1: return ' ';
  case LUA_TTABLE: return '.';
  case LUA_TFUNCTION: return '(';
  default: return '\0';
  }
}

static char **complete(const char *text, int start, int end) {
  (void)start;
  (void)end;
  rl_attempted_completion_over = 1; /* never fall back to file names */
  clear_candidates();
  lua_State *L = CL;
  int top = lua_gettop(L);
  const char *sep = NULL;
  for (const char *p = text; *p; p++)
    if (*p == '.' || *p == ':') sep = p;
  query_t q = {text, sep ? (size_t)(sep - text) + 1 : 0, sep ? sep + 1 : text, sep && *sep == ':'};
  if (!sep) {
    lua_pushvalue(L, LUA_GLOBALSINDEX);
    offer_fields(L, &q);
    for (int i = 0; keywords[i]; i++) offer(&q, keywords[i], strlen(keywords[i]), -1);
  } else if (push_path(L, text, (size_t)(sep - text))) {
    offer_fields(L, &q);
  }
  lua_settop(L, top);
  if (n_cands == 0) return NULL;
  if (n_cands == 1) rl_completion_append_character = append_for(cands[0].type);
  return rl_completion_matches(text, next_candidate);
}

void host_complete_init(lua_State *L) {
  CL = L;
  rl_attempted_completion_function = complete;
  /* '.' and ':' are not word breaks: "engine.F.ta" is one word to complete. */
  rl_completer_word_break_characters = " \t\n\"\\'`@$><=;|&{}()[],+-*/%^~#";
}
