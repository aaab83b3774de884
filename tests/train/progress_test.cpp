// The progress display: plain lines off a terminal (about every tenth of the run, and the first
// and last step), a single redrawn line on one.

#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "train/progress.h"

namespace minitrain {
namespace {

StepStats stats(int64_t step) {
  StepStats s;
  s.step = step;
  s.epoch = 1 + (step - 1) / 10;
  s.loss = 1.0 / static_cast<double>(step);
  s.lr = 0.003;
  s.samples = 123;
  s.samples_per_s = 12345.4;  // the step's own rate: not what the lines show
  return s;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

TEST(Progress, PlainLinesComeEveryTenthOfTheRunWithStepLossRateAndEta) {
  std::ostringstream out;
  Progress::Clock::time_point t{};
  Progress p(out, ProgressMode::Lines, 1, 100, [&t] { return t; });
  for (int64_t s = 1; s <= 100; ++s) {
    t += std::chrono::milliseconds(10);  // 123 samples per 10 ms of wall time
    p.update(stats(s));
  }
  p.finish();
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 11u) << out.str();  // step 1, then 10, 20, ..., 100
  EXPECT_EQ(
      lines[0].rfind("step 1/100 (1%)  epoch 1  loss 1  lr 0.003  12300 samples/s  ETA 0:01", 0),
      0u)
      << lines[0];
  const std::regex format(
      R"(step \d+/100 \(\d+%\)  epoch \d+  loss [0-9.e+-]+  lr 0\.003  12300 samples/s  ETA \d+:\d\d)");
  for (const std::string& l : lines) EXPECT_TRUE(std::regex_match(l, format)) << l;
  EXPECT_EQ(lines[1].rfind("step 10/100 (10%)  epoch 1  loss 0.1  ", 0), 0u) << lines[1];
  EXPECT_EQ(lines.back().rfind("step 100/100 (100%)  epoch 10  loss 0.01  ", 0), 0u)
      << lines.back();
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
}

// Issue 30: a 16-step run printed every step (a tenth rounded down is 1). Now a tenth rounded up to
// 1, 2 or 5 x 10^k: every 2nd step for 16, every 20th for 199; never more than 11 lines.
TEST(Progress, ShortAndOddRunsPrintAtARoundCadence) {
  for (const auto& [steps, want] : std::vector<std::pair<int64_t, std::vector<int64_t>>>{
           {16, {1, 2, 4, 6, 8, 10, 12, 14, 16}},
           {199, {1, 20, 40, 60, 80, 100, 120, 140, 160, 180, 199}},
           {7, {1, 2, 3, 4, 5, 6, 7}}}) {
    std::ostringstream out;
    Progress p(out, ProgressMode::Lines, 1, steps);
    for (int64_t s = 1; s <= steps; ++s) p.update(stats(s));
    std::vector<int64_t> got;
    for (const std::string& l : lines_of(out.str())) got.push_back(std::stoll(l.substr(5)));
    EXPECT_EQ(got, want) << steps << " steps:\n" << out.str();
  }
}

TEST(Progress, ResumedRunCountsFromItsFirstStep) {
  std::ostringstream out;
  Progress p(out, ProgressMode::Lines, 51, 60);
  for (int64_t s = 51; s <= 60; ++s) p.update(stats(s));
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 10u);  // 10 steps: every one is a tenth
  EXPECT_EQ(lines[0].rfind("step 51/60 (85%)", 0), 0u) << lines[0];
}

TEST(Progress, BarRedrawsOneLineAndEndsIt) {
  std::ostringstream out;
  Progress p(out, ProgressMode::Bar, 1, 4);
  for (int64_t s = 1; s <= 4; ++s) p.update(stats(s));
  p.finish();
  const std::string text = out.str();
  EXPECT_EQ(text.front(), '\r');
  EXPECT_EQ(lines_of(text).size(), 1u) << "a bar is one line";
  EXPECT_NE(text.find("[########################] 4/4  loss 0.25  "), std::string::npos) << text;
  EXPECT_NE(text.find(" steps/s  ETA 0:00"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
}

TEST(Progress, NoneWritesNothing) {
  std::ostringstream out;
  Progress p(out, ProgressMode::None, 1, 3);
  p.update(stats(1));
  p.finish();
  EXPECT_TRUE(out.str().empty());
}

// A user trial: under load the lines read 4-6x the rate of the run's "done" line, because each
// step's own samples_per_s leaves out the wait for data and the logging between steps. A line's
// rate is the wall rate over its window: the samples of the steps since the previous line over
// the wall time since it (since the start for the first line).
TEST(Progress, LinesReportTheWallRateOverTheWindowSinceThePreviousLine) {
  Progress::Clock::time_point t{};
  Progress::Now clock = [&t] { return t; };
  std::ostringstream out;
  Progress p(out, ProgressMode::Lines, 1, 20, clock);  // a line at steps 1, 2, 4, ..., 20
  std::vector<std::string> rates;
  for (int64_t step = 1; step <= 20; ++step) {
    // Each step computes for 10 ms (its own rate: 64 / 0.010 = 6400 samples/s) and then waits
    // 30 ms for its data or the log, so the wall clock moves 40 ms per step: 1600 samples/s.
    // From step 11 on, the steps take half the wall time: 3200 samples/s.
    t += std::chrono::milliseconds(step <= 10 ? 40 : 20);
    StepStats s = stats(step);
    s.samples = 64;
    s.samples_per_s = 6400;
    p.update(s);
  }
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 11u) << out.str();
  const std::regex rate(R"(  (\d+) samples/s  )");
  for (const std::string& l : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(l, m, rate)) << l;
    rates.push_back(m[1]);
  }
  // Steps 1..10: 1600/s in every window, not the steps' own 6400; step 12 (the window of steps 11
  // and 12) and on: 3200/s, the window's rate and not the run's mean so far.
  for (std::size_t i = 0; i < rates.size(); ++i)
    EXPECT_EQ(rates[i], i <= 5 ? "1600" : "3200") << lines[i];
}

TEST(Progress, DurationsReadAsClockTimes) {
  EXPECT_EQ(format_duration(2.4), "0:02");
  EXPECT_EQ(format_duration(65), "1:05");
  EXPECT_EQ(format_duration(7384), "2:03:04");
  EXPECT_EQ(format_duration(-1), "?");
}

}  // namespace
}  // namespace minitrain
