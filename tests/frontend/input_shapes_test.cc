// parse_input_shapes: the CLI's --input-shapes syntax.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frontend/onnx_import.h"

using kiln::frontend::ImportError;
using kiln::frontend::InputShapes;
using kiln::frontend::parse_input_shapes;
using ::testing::HasSubstr;

namespace {

TEST(InputShapes, ParsesSeveralInputs) {
  InputShapes s = parse_input_shapes("input:[1,3,224,224],mask:[1,128]");
  EXPECT_EQ(s, (InputShapes{{"input", {1, 3, 224, 224}}, {"mask", {1, 128}}}));
}

TEST(InputShapes, SpacesScalarsAndColonsInNames) {
  EXPECT_EQ(parse_input_shapes(" a : [ 1 , 2 ] , b:[] "), (InputShapes{{"a", {1, 2}}, {"b", {}}}));
  EXPECT_EQ(parse_input_shapes("input:0:[8]"), (InputShapes{{"input:0", {8}}}));
  EXPECT_TRUE(parse_input_shapes("").empty());
}

std::string parse_error(const std::string& text) {
  try {
    parse_input_shapes(text);
  } catch (const ImportError& e) {
    return e.what();
  }
  ADD_FAILURE() << "\"" << text << "\" parsed";
  return "";
}

TEST(InputShapes, MalformedTextIsAnError) {
  EXPECT_THAT(parse_error("x[1,2]"), HasSubstr("missing ':'"));
  EXPECT_THAT(parse_error("x:1,2"), HasSubstr("missing '['"));
  EXPECT_THAT(parse_error("x:[1,2"), HasSubstr("missing ']' for 'x'"));
  EXPECT_THAT(parse_error("x:[1,a]"), HasSubstr("dimension 'a' of 'x'"));
  EXPECT_THAT(parse_error("x:[1,-1]"), HasSubstr("dimension '-1' of 'x'"));
  EXPECT_THAT(parse_error("x:[1,,2]"), HasSubstr("dimension '' of 'x'"));
  EXPECT_THAT(parse_error("x:[1];y:[2]"), HasSubstr("expected ','"));
  EXPECT_THAT(parse_error("x:[1],"), HasSubstr("trailing ','"));
  EXPECT_THAT(parse_error("x:[1],x:[2]"), HasSubstr("'x' is given twice"));
  EXPECT_THAT(parse_error(":[1]"), HasSubstr("name is empty"));
  // Every message quotes the text and shows the expected form.
  EXPECT_THAT(parse_error("x[1]"), HasSubstr("--input-shapes \"x[1]\""));
  EXPECT_THAT(parse_error("x[1]"), HasSubstr("name:[d0,d1,...]"));
}

}  // namespace
