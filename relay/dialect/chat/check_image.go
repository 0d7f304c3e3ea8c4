package chat

import (
	"encoding/json"
	"slices"

	"github.com/relaydev/relay/relay/wire"
)

// imageTypes are the media types of the images a request may carry
// inline, the ones every vision model reads (ImageTypesText).
var imageTypes = [...]string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// ImageTypesText lists the media types of the images a request may carry
// inline, for an error message.
const ImageTypesText = "image/png, image/jpeg, image/gif or image/webp"

// IsImageType reports whether a media type, as the Messages API spells it
// (lower case), is one of ImageTypesText.
func IsImageType(mediaType string) bool {
	return slices.Contains(imageTypes[:], mediaType)
}

// AllowedImageURL reports whether a provider may be asked to read an
// image at u: over https, or inline as a data: URL of one of ImageTypes.
// Any other scheme asks the provider, or whatever fetches for it, to read
// what a tenant has no business reading (file:, an internal http: host)
// or to run it (javascript:). Schemes and media types match in any case,
// as RFC 3986 and RFC 2045 have them. It takes bytes too, so that the one
// pass judges a URL without copying it.
func AllowedImageURL[T string | []byte](u T) bool {
	if host, ok := cutPrefixFold(u, "https://"); ok {
		return len(host) > 0 && host[0] != '/' && host[0] != '?' && host[0] != '#'
	}
	rest, ok := cutPrefixFold(u, "data:")
	if !ok {
		return false
	}
	for _, t := range imageTypes {
		if params, ok := cutPrefixFold(rest, t); ok && len(params) > 0 && (params[0] == ';' || params[0] == ',') {
			for i := range len(params) {
				if params[i] == ',' {
					return true
				}
			}
		}
	}
	return false
}

// cutPrefixFold is s after prefix, a lower-case ASCII prefix, if s begins
// with it in any case.
func cutPrefixFold[T string | []byte](s T, prefix string) (T, bool) {
	if len(s) < len(prefix) {
		return s, false
	}
	for i := range len(prefix) {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return s, false
		}
	}
	return s[len(prefix):], true
}

// checkImage checks a content part's image_url: an object whose url
// AllowedImageURL accepts. Of a url given twice, the last counts, as in
// encoding/json; the one pass leaves such a part to this check.
func checkImage(raw json.RawMessage, param string) *wire.Error {
	var image map[string]json.RawMessage
	var url string
	if json.Unmarshal(raw, &image) != nil || image == nil || json.Unmarshal(image["url"], &url) != nil {
		return Invalid(param, CodeInvalidValue, "%s must be an object with a url", param)
	}
	if !AllowedImageURL(url) {
		return Invalid(param+".url", CodeInvalidValue, "%s.url must be an https: URL or a data: URL of %s", param, ImageTypesText)
	}
	return nil
}
