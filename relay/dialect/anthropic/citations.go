package anthropic

import "encoding/json"

// citedBlock gathers the web citations of an Anthropic text block, to
// give OpenAI-shaped clients url_citation annotations: a citation covers
// its whole block, whose extent is known at its content_block_stop.
// Citations of documents (char_location and the like) have no URL, which
// an annotation needs; they reach Messages clients only (chat.Delta.Citations).
type citedBlock struct {
	// start is the block's first character in the call's answer text.
	start int
	urls  []webCitation
}

type webCitation struct {
	URL   string `json:"url"`
	Title string `json:"title"`
}

// add keeps citation c if it has a URL.
func (b *citedBlock) add(c []byte) error {
	var w webCitation
	if err := json.Unmarshal(c, &w); err != nil {
		return err
	}
	if w.URL != "" {
		b.urls = append(b.urls, w)
	}
	return nil
}

// annotations are the block's citations as chat url_citation annotations
// spanning the block, which ends at character end; nil without any. As a
// chat provider's, the indexes count from the start of the call's own
// text.
func (b *citedBlock) annotations(end int) json.RawMessage {
	if len(b.urls) == 0 {
		return nil
	}
	type urlCitation struct {
		EndIndex   int    `json:"end_index"`
		StartIndex int    `json:"start_index"`
		Title      string `json:"title"`
		URL        string `json:"url"`
	}
	type annotation struct {
		Type        string      `json:"type"`
		URLCitation urlCitation `json:"url_citation"`
	}
	out := make([]annotation, len(b.urls))
	for i, w := range b.urls {
		out[i] = annotation{Type: "url_citation", URLCitation: urlCitation{EndIndex: end, StartIndex: b.start, Title: w.Title, URL: w.URL}}
	}
	raw, _ := json.Marshal(out)
	return raw
}
