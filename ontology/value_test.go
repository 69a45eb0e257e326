package ontology

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestValueAs: the conversions a declared kind allows are exact or
// refused; nothing is rounded.
func TestValueAs(t *testing.T) {
	at := time.Date(2026, 12, 3, 21, 0, 0, 5, time.UTC)
	tests := []struct {
		name string
		v    Value
		k    Kind
		want Value // invalid: refused
	}{
		{"same kind", String("x"), KindString, String("x")},
		{"NaN stays a float", Float(math.NaN()), KindFloat, Float(math.NaN())},
		{"time stays", Time(at), KindTime, Time(at)},
		{"int to float, exact", Int(1 << 53), KindFloat, Float(1 << 53)},
		{"int to float, not exact", Int(1<<53 + 1), KindFloat, Value{}},
		{"largest int to float rounds up to 2^63", Int(math.MaxInt64), KindFloat, Value{}},
		{"smallest int to float", Int(math.MinInt64), KindFloat, Float(-0x1p63)},
		{"integral float to int", Float(-2), KindInt, Int(-2)},
		{"negative zero to int", Float(math.Copysign(0, -1)), KindInt, Int(0)},
		{"fraction to int", Float(2.5), KindInt, Value{}},
		{"2^63 to int", Float(0x1p63), KindInt, Value{}},
		{"-2^63 to int", Float(-0x1p63), KindInt, Int(math.MinInt64)},
		{"NaN to int", Float(math.NaN()), KindInt, Value{}},
		{"Inf to int", Float(math.Inf(1)), KindInt, Value{}},
		{"string to int", String("5"), KindInt, Value{}},
		{"bool to int", Bool(true), KindInt, Value{}},
		{"int to string", Int(5), KindString, Value{}},
		{"int to time", Int(5), KindTime, Value{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.v.As(tt.k)
			assert.Equal(t, tt.want.IsValid(), ok)
			if tt.want.IsNaN() {
				assert.True(t, got.IsNaN())
				return
			}
			assert.Equal(t, tt.want, got)
			if ok {
				assert.Equal(t, tt.k, got.Kind())
			}
		})
	}
}
