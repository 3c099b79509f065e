// ncurses (wide-character build) from Debian's libncurses-dev, for the terminal view.
#define NCURSES_WIDECHAR 1
#include <ncurses.h>

// The standard screen, as a function: Swift 6 refuses to read the mutable C global directly.
static inline WINDOW *gc_screen(void) { return stdscr; }
