/* Ctrl-C while Lua code runs. A signal handler may not raise a Lua error, so, as lua.c does, it
 * installs a hook that raises "interrupted!" at the next call, return or instruction. The hook
 * never fires inside a JIT-compiled loop (LuaJIT traces do not check hooks); a second Ctrl-C then
 * falls back to the default action and ends the process instead of leaving it stuck. */
#include <lauxlib.h>
#include <signal.h>
#include <stddef.h>

#include "host/host.h"

static lua_State *volatile running;
static volatile sig_atomic_t stopping;
static struct sigaction saved;

static void stop_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void on_sigint(int sig) {
  lua_State *L = running;
  if (!L || stopping) {
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when this handler returns */
    return;
  }
  stopping = 1;
  lua_sethook(L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

void host_interrupt_begin(lua_State *L) {
  stopping = 0;
  running = L;
  struct sigaction act;
  act.sa_handler = on_sigint;
  sigemptyset(&act.sa_mask);
  act.sa_flags = 0;
  sigaction(SIGINT, &act, &saved);
}

void host_interrupt_end(lua_State *L) {
  sigaction(SIGINT, &saved, NULL);
  running = NULL;
  stopping = 0;
  /* A Ctrl-C that came as the code finished must not stop the next chunk. */
  lua_sethook(L, NULL, 0, 0);
}
