package statusview

import (
	"fmt"
	"io"
	"strings"
)

// Terminal control codes (ANSI/VT100) of the watch view.
const (
	hideCursor  = "\x1b[?25l"
	showCursor  = "\x1b[?25h"
	noWrap      = "\x1b[?7l" // a long line is cut at the right edge
	wrap        = "\x1b[?7h"
	cursorHome  = "\x1b[H"
	clearScreen = "\x1b[2J"
	clearLine   = "\x1b[K" // from the cursor to the end of the line
	clearBelow  = "\x1b[J" // from the cursor to the end of the screen
)

// screen draws each view over the previous one on a terminal. Every view
// takes one row per line (long lines are cut, not wrapped) and at most the
// terminal's height less one, so the terminal never scrolls: the views do
// not pile up in its scrollback, and the cursor waits on the row below.
type screen struct {
	out  io.Writer
	rows func() int // the terminal's height, 0 when unknown
}

// open clears the terminal and hides the cursor.
func (s *screen) open() error {
	_, err := io.WriteString(s.out, hideCursor+noWrap+cursorHome+clearScreen)
	return err
}

// draw writes view from the top-left corner, each line clearing the rest
// of the previous view's line, then clears what is below.
func (s *screen) draw(view []byte) error {
	lines := strings.Split(strings.TrimSuffix(string(view), "\n"), "\n")
	if rows := s.rows(); rows > 1 && len(lines) > rows-1 {
		more := len(lines) - (rows - 2)
		lines = append(lines[:rows-2], fmt.Sprintf("… %d more lines: enlarge the terminal", more))
	}
	var b strings.Builder
	b.WriteString(cursorHome)
	for _, l := range lines {
		b.WriteString(l + clearLine + "\r\n")
	}
	b.WriteString(clearBelow)
	_, err := io.WriteString(s.out, b.String())
	return err
}

// close leaves the last view where it is and restores the terminal: the
// cursor shown at the start of the (cleared) row below the view, which
// wipes a "^C" the terminal echoed there, colours reset, wrapping on.
func (s *screen) close() {
	io.WriteString(s.out, "\r"+clearLine+reset+wrap+showCursor)
}
