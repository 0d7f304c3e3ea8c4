package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

var durationType = reflect.TypeFor[time.Duration]()

// durationHook decodes every time.Duration of the configuration from a
// string with a unit ("250ms", "15s", "24h"). A bare number is refused
// whatever layer it came from: YAML reads `15` as an int, which
// mapstructure would take as 15 nanoseconds, and "15" from the
// environment or --set would fail with time's terse "missing unit". Zero,
// written 0 or "0", is allowed: it means the field's default, as an absent
// key does, and needs no unit to be unambiguous.
func durationHook() mapstructure.DecodeHookFuncType {
	return func(from, to reflect.Type, data any) (any, error) {
		if to != durationType || from == durationType {
			return data, nil
		}
		switch from.Kind() {
		case reflect.String:
			s := strings.TrimSpace(data.(string))
			if n, err := strconv.ParseFloat(s, 64); err == nil {
				if n == 0 {
					return time.Duration(0), nil
				}
				return nil, errNoUnit(s)
			}
			d, err := time.ParseDuration(s)
			if err != nil {
				return nil, fmt.Errorf("%q is not a duration: write a number with a unit, e.g. \"15s\", \"250ms\" or \"1h\"", s)
			}
			return d, nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			if reflect.ValueOf(data).IsZero() {
				return time.Duration(0), nil
			}
			return nil, errNoUnit(fmt.Sprint(data))
		}
		return data, nil
	}
}

func errNoUnit(number string) error {
	return fmt.Errorf("%s has no unit: a duration needs one, e.g. \"%ss\" or \"%sms\" (0 alone means the default)", number, number, number)
}
